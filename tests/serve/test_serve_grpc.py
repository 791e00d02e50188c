"""`grove serve --grpc-port`: the KServe v2 protocol over gRPC, driven by a Python client
generated from src/grpc_serve/kserve_v2.proto with Debian's python3-grpc-tools: the same
answers as REST and `grove run`, under 32 concurrent clients, and gRPC status codes with the
REST messages for bad calls."""
import concurrent.futures
import importlib
import os
import subprocess
import sys
import tempfile
import time

import numpy as np
import pytest

GROVE = os.environ["GROVE_BIN"]
SRC = os.environ["GROVE_SOURCE_DIR"]
CNN = os.path.join(SRC, "models", "default.onnx")
X = np.load(os.path.join(SRC, "models", "default_input.npy"))
PROTO_DIR = os.path.join(SRC, "src", "grpc_serve")

grpc = pytest.importorskip("grpc", reason="python3-grpcio")
pytest.importorskip("grpc_tools", reason="python3-grpc-tools")


@pytest.fixture(scope="module")
def protocol(tmp_path_factory):
    """The generated client modules (kserve_v2_pb2, kserve_v2_pb2_grpc)."""
    out = str(tmp_path_factory.mktemp("kserve_client"))
    subprocess.run([sys.executable, "-m", "grpc_tools.protoc", "-I" + PROTO_DIR, "--python_out=" + out,
                    "--grpc_python_out=" + out, "kserve_v2.proto"], check=True)
    sys.path.insert(0, out)
    return importlib.import_module("kserve_v2_pb2"), importlib.import_module("kserve_v2_pb2_grpc")


def tiny_model(path):
    from onnx import TensorProto, helper, save

    x = helper.make_tensor_value_info("x", TensorProto.FLOAT, ["N", 4])
    y = helper.make_tensor_value_info("y", TensorProto.FLOAT, ["N", 4])
    k = helper.make_tensor_value_info("k", TensorProto.INT64, ["N"])
    s = helper.make_tensor_value_info("s", TensorProto.INT64, ["N"])
    graph = helper.make_graph([helper.make_node("Relu", ["x"], ["y"], name="relu"),
                               helper.make_node("Neg", ["k"], ["s"], name="neg")], "tiny", [x, k], [y, s])
    save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)


class Server:
    def __init__(self, *args):
        self.proc = subprocess.Popen([GROVE, "serve", "--port", "0", "--grpc-port", "0", "--threads", "2", "--calibrate-when-idle", "0", *args],
                                     stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        self.grpc_port = None
        deadline = time.time() + 60
        while time.time() < deadline and self.grpc_port is None:
            line = self.proc.stdout.readline()
            if not line:
                err = self.proc.stderr.read()
                if "built without gRPC" in err:
                    pytest.skip(err.strip())
                raise RuntimeError("grove serve exited: " + err)
            if "gRPC on" in line:
                self.grpc_port = int(line.split("gRPC on 127.0.0.1:")[1].split()[0])
        assert self.grpc_port, "grove serve did not start its gRPC front end"

    def stop(self):
        self.proc.terminate()
        return self.proc.wait(timeout=60)


@pytest.fixture(scope="module")
def stub(protocol):
    pb, rpc = protocol
    with tempfile.TemporaryDirectory() as d:
        tiny_model(os.path.join(d, "tiny.onnx"))
        server = Server("--model", "cnn=" + CNN, "--model-repository", d, "--max-body-bytes", str(1 << 20))
        channel = grpc.insecure_channel(f"127.0.0.1:{server.grpc_port}",
                                        options=[("grpc.max_send_message_length", -1), ("grpc.max_receive_message_length", -1)])
        yield rpc.GRPCInferenceServiceStub(channel)
        channel.close()
        assert server.stop() == 0


def image_request(pb, raw=True, outputs=()):
    req = pb.ModelInferRequest(model_name="cnn", id="img")
    t = req.inputs.add(name="image", datatype="FP32", shape=list(X.shape))
    if raw:
        req.raw_input_contents.append(X.astype(np.float32).tobytes())
    else:
        t.contents.fp32_contents.extend(X.ravel().tolist())
    for name in outputs:
        req.outputs.add(name=name)
    return req


def logits(response):
    out = response.outputs[0]
    assert out.name == "logits" and out.datatype == "FP32"
    return np.frombuffer(response.raw_output_contents[0], dtype=np.float32).reshape(list(out.shape))


def test_health_and_metadata(stub, protocol):
    pb, _ = protocol
    assert stub.ServerLive(pb.ServerLiveRequest()).live
    assert stub.ServerReady(pb.ServerReadyRequest()).ready
    meta = stub.ServerMetadata(pb.ServerMetadataRequest())
    assert meta.name == "grove" and "binary_tensor_data" in meta.extensions
    assert stub.ModelReady(pb.ModelReadyRequest(name="cnn")).ready
    m = stub.ModelMetadata(pb.ModelMetadataRequest(name="tiny"))
    assert [(t.name, t.datatype, list(t.shape)) for t in m.inputs] == [("x", "FP32", [-1, 4]), ("k", "INT64", [-1])]
    assert list(m.versions) == ["1"] and m.platform == "onnx"
    index = stub.RepositoryIndex(pb.RepositoryIndexRequest(ready=True))
    assert sorted((e.name, e.state) for e in index.models) == [("cnn", "READY"), ("tiny", "READY")]


def test_raw_and_typed_contents_give_grove_runs_answer(stub, protocol, grove_run_logits):
    pb, _ = protocol
    raw = stub.ModelInfer(image_request(pb))
    assert raw.model_name == "cnn" and raw.model_version == "1" and raw.id == "img"
    np.testing.assert_array_equal(logits(raw), grove_run_logits)
    typed = stub.ModelInfer(image_request(pb, raw=False, outputs=["logits"]))
    np.testing.assert_array_equal(logits(typed), grove_run_logits)
    # Two inputs of two datatypes, typed, and one output asked for.
    req = pb.ModelInferRequest(model_name="tiny")
    req.inputs.add(name="x", datatype="FP32", shape=[2, 4]).contents.fp32_contents.extend([-1, 2, -3, 4, 5, -6, 7, -8])
    req.inputs.add(name="k", datatype="INT64", shape=[2]).contents.int64_contents.extend([3, -4])
    req.outputs.add(name="s")
    r = stub.ModelInfer(req)
    assert [o.name for o in r.outputs] == ["s"]
    np.testing.assert_array_equal(np.frombuffer(r.raw_output_contents[0], dtype=np.int64), [-3, 4])


def test_a_thousand_calls_from_32_clients_equal_grove_run(stub, protocol, grove_run_logits):
    pb, _ = protocol
    cnn = image_request(pb)
    tiny = pb.ModelInferRequest(model_name="tiny")
    tiny.inputs.add(name="x", datatype="FP32", shape=[1, 4])
    tiny.inputs.add(name="k", datatype="INT64", shape=[1])
    tiny.raw_input_contents.extend([np.array([-1, 2, -3, 4], np.float32).tobytes(), np.array([7], np.int64).tobytes()])

    def call(i):
        if i % 2:
            r = stub.ModelInfer(tiny)
            return np.array_equal(np.frombuffer(r.raw_output_contents[0], np.float32), [0, 2, 0, 4])
        return np.array_equal(logits(stub.ModelInfer(cnn)), grove_run_logits)

    with concurrent.futures.ThreadPoolExecutor(32) as pool:
        results = list(pool.map(call, range(1000)))
    assert all(results), f"{results.count(False)} of 1000 answers differ"


@pytest.mark.parametrize("case", ["unknown-model", "missing-input", "bad-shape", "raw-count", "fp16-typed",
                                  "too-large", "unknown-output"])
def test_bad_calls_get_a_status_code_and_the_rest_message(stub, protocol, case):
    pb, _ = protocol
    req = image_request(pb)
    code, words = grpc.StatusCode.INVALID_ARGUMENT, ""
    if case == "unknown-model":
        req.model_name, code, words = "nope", grpc.StatusCode.NOT_FOUND, "unknown model 'nope'"
    elif case == "missing-input":
        req = pb.ModelInferRequest(model_name="cnn")
        words = "missing input 'image'"
    elif case == "bad-shape":
        req.inputs[0].shape[2] = 56
        words = "model 'cnn' expects 1x3x112x112"
    elif case == "raw-count":
        req.raw_input_contents.append(b"")
        words = "raw_input_contents has 2 entries for 1 inputs"
    elif case == "fp16-typed":
        req = pb.ModelInferRequest(model_name="cnn")
        req.inputs.add(name="image", datatype="FP16", shape=[1]).contents.fp32_contents.append(1)
        words = "FP16"
    elif case == "too-large":
        req.raw_input_contents[0] = bytes(2 << 20)
        code, words = grpc.StatusCode.RESOURCE_EXHAUSTED, ""
    elif case == "unknown-output":
        req.outputs.add(name="nope")
        words = "nope"
    with pytest.raises(grpc.RpcError) as e:
        stub.ModelInfer(req)
    assert e.value.code() == code, e.value.details()
    assert words in e.value.details(), e.value.details()
    assert "\n" not in e.value.details()

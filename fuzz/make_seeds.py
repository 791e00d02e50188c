#!/usr/bin/python3
"""Writes the committed seed corpora (small on purpose): tiny ONNX models covering common op
families, .npy files of every dtype grove reads, and choice scripts for the graph target.
The TileGraph seed is written by `fuzz_tilegraph_replay --write-seed` (scripts/fuzz.sh).
`make_seeds.py serve` writes only the raw HTTP seeds of fuzz_serve (no onnx needed)."""
import gzip
import os
import random
import sys
import zlib

here = os.path.dirname(os.path.abspath(__file__))


def write_http_seeds():
    """fuzz_serve seeds that start with 'H': the bytes of one connection, through the
    listener's parser and framing checks (fuzz_serve.cpp). Each reaches one refusal or path of
    the load and abuse stage (tests/serve/abuse_test.py), small enough for -max_len=65536."""
    add = b'{"inputs":[{"name":"x","shape":[2,3],"datatype":"FP32","data":[1,2,3,4,5,6]}]}'

    def post(body, *headers, path=b"/v2/models/add/infer", length=True):
        lines = [b"POST " + path + b" HTTP/1.1", b"Host: f"] + list(headers)
        if length:
            lines.append(b"Content-Length: %d" % len(body))
        return b"\r\n".join(lines) + b"\r\n\r\n" + body

    def chunked(body, size):
        pieces = [body[i:i + size] for i in range(0, len(body), size)]
        return b"".join(b"%x\r\n%s\r\n" % (len(p), p) for p in pieces) + b"0\r\n\r\n"

    deep = 15000  # levels: 30 KB of brackets, under the listener's 32 KiB body limit in fuzz_serve
    seeds = {
        "http_add": post(add),
        "http_deep_data": post(b'{"inputs":[{"name":"x","shape":[2,3],"datatype":"FP32","data":' + b"[" * deep + b"]" * deep + b"}]}"),
        "http_deep_parameters": post(add[:-1] + b',"parameters":{"p":' + b"[" * deep + b"]" * deep + b"}}"),
        "http_gzip": post(gzip.compress(bytes(1 << 16), mtime=0), b"Content-Encoding: gzip"),
        "http_deflate_chunked": post(chunked(zlib.compress(bytes(1 << 16)), 40), b"Transfer-Encoding: chunked",
                                     b"Content-Encoding: deflate", length=False),
        "http_chunked": post(chunked(add, 7), b"Transfer-Encoding: chunked", length=False),
        "http_chunked_over": post(b"ffffff\r\n" + b"7" * 40000, b"Transfer-Encoding: chunked", length=False),
        "http_chunked_bad_size": post(b"zz\r\nab\r\n0\r\n\r\n", b"Transfer-Encoding: chunked", length=False),
        "http_chunked_and_length": post(chunked(add, 16), b"Transfer-Encoding: chunked", b"Content-Length: 5", length=False),
        "http_transfer_gzip": post(add, b"Transfer-Encoding: gzip", length=False),
        "http_length_bad": post(add, b"Content-Length: 12abc", length=False),
        "http_length_twice": post(add, b"Content-Length: %d" % len(add), b"Content-Length: 3", length=False),
        "http_length_over": post(b"", b"Content-Length: 99999999", length=False),
        "http_length_short": post(add, b"Content-Length: %d" % (len(add) + 100), length=False),
        "http_expect_over": post(b"", b"Expect: 100-continue", b"Content-Length: 99999999", length=False),
        "http_no_length": post(add, length=False),
        "http_partial_headers": b"POST /v2/models/add/infer HTTP/1.1\r\nHost: f\r\nContent-Le",
        "http_partial_line": b"POST /v2/models/a",
        "http_pipelined": b"GET /v2/health/ready HTTP/1.1\r\nHost: f\r\n\r\n" + post(add) +
                          b"GET /v2/models/pair HTTP/1.1\r\nHost: f\r\nConnection: close\r\n\r\n",
        "http_get_with_body": b"GET /metrics HTTP/1.1\r\nHost: f\r\nContent-Length: 5\r\n\r\nGET /" + post(add),
        "http_binary": post(b'{"inputs":[{"name":"x","shape":[1,4],"datatype":"FP32","parameters":{"binary_data_size":16}}]}' +
                            bytes(16), b"Inference-Header-Content-Length: 94", path=b"/v2/models/pair/infer"),
        "http_method": b"BREW /v2 HTTP/1.1\r\nHost: f\r\n\r\n",
        "http_multipart": post(b"--b\r\n\r\nx\r\n--b--\r\n", b"Content-Type: multipart/form-data; boundary=b"),
    }
    for name, data in seeds.items():
        with open(os.path.join(here, "corpus", "serve", name), "wb") as out:
            out.write(b"H" + data)


if len(sys.argv) > 1 and sys.argv[1] == "serve":
    write_http_seeds()
    sys.exit(0)

import numpy as np  # noqa: E402
import onnx  # noqa: E402
from onnx import TensorProto, helper, numpy_helper  # noqa: E402


def save_model(name, nodes, inputs, outputs, inits=(), opset=17, metadata=None):
    g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    if metadata:
        helper.set_model_props(m, metadata)
    m.ir_version = 8
    onnx.save(m, os.path.join(here, "corpus", "model", name + ".onnx"))


def f(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def init(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


rng = np.random.default_rng(0)
w = rng.standard_normal((4, 2, 3, 3)).astype(np.float32)
save_model("conv_relu", [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
                         helper.make_node("Relu", ["c"], ["y"])],
           [f("x", [1, 2, 6, 6])], [f("y", [1, 4, 6, 6])], [init("w", w)])
save_model("matmul_add_softmax",
           [helper.make_node("MatMul", ["x", "b"], ["m"]), helper.make_node("Add", ["m", "c"], ["a"]),
            helper.make_node("Softmax", ["a"], ["y"], axis=-1)],
           [f("x", ["n", 8])], [f("y", ["n", 4])],
           [init("b", rng.standard_normal((8, 4)).astype(np.float32)), init("c", np.ones(4, np.float32))])
save_model("reshape_transpose",
           [helper.make_node("Reshape", ["x", "s"], ["r"]), helper.make_node("Transpose", ["r"], ["y"], perm=[1, 0])],
           [f("x", [2, 3, 4])], [f("y", [4, 6])], [init("s", np.array([6, 4], np.int64))])
save_model("pool_concat",
           [helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
            helper.make_node("GlobalAveragePool", ["x"], ["g"]),
            helper.make_node("Flatten", ["p"], ["fp"]), helper.make_node("Flatten", ["g"], ["fg"]),
            helper.make_node("Concat", ["fp", "fg"], ["y"], axis=1)],
           [f("x", [1, 3, 4, 4])], [f("y", [1, 15])])
save_model("layernorm_gelu",
           [helper.make_node("LayerNormalization", ["x", "g", "b"], ["l"], axis=-1),
            helper.make_node("Erf", ["l"], ["e"]), helper.make_node("Mul", ["l", "e"], ["y"])],
           [f("x", [2, 5, 8])], [f("y", [2, 5, 8])],
           [init("g", np.ones(8, np.float32)), init("b", np.zeros(8, np.float32))])
# A dynamic model: its grove.subnets metadata is sliced into sub-nets (docs/dynamic.md).
save_model("dynamic_subnets",
           [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1], name="conv1"),
            helper.make_node("BatchNormalization", ["a", "s", "b", "m", "v"], ["n"], name="bn"),
            helper.make_node("Relu", ["n"], ["r"]), helper.make_node("GlobalAveragePool", ["r"], ["g"]),
            helper.make_node("Flatten", ["g"], ["fl"]),
            helper.make_node("Gemm", ["fl", "w2"], ["y"], transB=1, name="fc")],
           [f("x", [1, 2, 4, 4])], [f("y", [1, 3])],
           [init("w1", rng.standard_normal((4, 2, 3, 3)).astype(np.float32)), init("s", np.ones(4, np.float32)),
            init("b", np.zeros(4, np.float32)), init("m", np.zeros(4, np.float32)), init("v", np.ones(4, np.float32)),
            init("m@half", np.full(2, 0.5, np.float32)), init("w2", rng.standard_normal((3, 4)).astype(np.float32))],
           metadata={"grove.subnets": "exempt fc\nsubnet half ratio=0.5 accuracy=0.5\nsubnet nu conv1=3\nsubnet full ratio=1"})
# Antidote: grove.antidote metadata prunes the feature map r per input (docs/dynamic.md).
save_model("antidote_prune",
           [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1], name="conv1"),
            helper.make_node("Relu", ["a"], ["r"]),
            helper.make_node("Conv", ["r", "w2"], ["y"], pads=[1, 1, 1, 1], strides=[2, 2], name="conv2")],
           [f("x", [2, 2, 5, 5])], [f("y", [2, 3, 3, 3])],
           [init("w1", rng.standard_normal((4, 2, 3, 3)).astype(np.float32)),
            init("w2", rng.standard_normal((3, 4, 3, 3)).astype(np.float32))],
           metadata={"grove.antidote": "prune r channels=0.5 positions=0.75"})
save_model("gather_slice",
           [helper.make_node("Gather", ["x", "i"], ["g"], axis=0),
            helper.make_node("Slice", ["g", "st", "en"], ["y"])],
           [f("x", [5, 6])], [f("y", [2, 3])],
           [init("i", np.array([0, 4], np.int64)), init("st", np.array([0, 1], np.int64)),
            init("en", np.array([2, 4], np.int64))], opset=13)

for dt in ["<f4", "<f8", "<i8", "<i4", "<i2", "|i1", "|u1", "<u2", "<u4", "<u8", "|b1"]:
    arr = (np.arange(6) % 3).astype(np.dtype(dt)).reshape(2, 3)
    np.save(os.path.join(here, "corpus", "npy", dt.strip("<|") + ".npy"), arr)
np.save(os.path.join(here, "corpus", "npy", "scalar.npy"), np.float32(1.5))
np.save(os.path.join(here, "corpus", "npy", "empty.npy"), np.zeros((0, 3), np.float32))

r = random.Random(0)
for i in range(8):
    with open(os.path.join(here, "corpus", "graph", "script%d" % i), "wb") as out:
        out.write(bytes(r.randrange(256) for _ in range(64)))

write_http_seeds()

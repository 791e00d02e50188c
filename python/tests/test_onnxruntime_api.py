"""ONNX Runtime's Python API over grove (grove/onnxruntime_api.py): an unmodified ONNX Runtime
script runs on grove and gives ONNX Runtime's numbers, the reference being onnxruntime-node
1.20.1 as bench/peers/install.sh installs it."""
import os
import subprocess
import sys
import warnings

import numpy as np
import pytest

import grove
import grove as onnxruntime

SRC = os.environ.get("GROVE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
SCRIPT_DIR = os.path.join(os.path.dirname(os.path.abspath(__file__)), "ort_script")
DEFAULT_MODEL = os.path.join(SRC, "models", "default.onnx")
CACHE = os.path.join(os.environ.get("XDG_CACHE_HOME", os.path.join(os.path.expanduser("~"), ".cache")), "grove")
ORT_NODE = os.path.join(CACHE, "peers", "node_modules", "onnxruntime-node")


def two_output_model(path):
    """a [batch, 4] and b [4] in; sum = a + b and scores = Softmax(a W) out; with metadata."""
    import onnx
    from onnx import TensorProto, helper

    w = np.linspace(-1, 1, 12, dtype=np.float32).reshape(4, 3)
    graph = helper.make_graph(
        [helper.make_node("Add", ["a", "b"], ["sum"]), helper.make_node("MatMul", ["a", "w"], ["logits"]),
         helper.make_node("Softmax", ["logits"], ["scores"], axis=-1)],
        "two_outputs",
        [helper.make_tensor_value_info("a", TensorProto.FLOAT, ["batch", 4]),
         helper.make_tensor_value_info("b", TensorProto.FLOAT, [4])],
        [helper.make_tensor_value_info("sum", TensorProto.FLOAT, ["batch", 4]),
         helper.make_tensor_value_info("scores", TensorProto.FLOAT, ["batch", 3])],
        [helper.make_tensor("w", TensorProto.FLOAT, [4, 3], w.ravel())])
    model = helper.make_model(graph, producer_name="grove-test", opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    helper.set_model_props(model, {"purpose": "api test"})
    onnx.save(model, path)
    return path


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("models")
    rng = np.random.default_rng(7)
    return {
        "default": (DEFAULT_MODEL, [np.load(os.path.join(SRC, "models", "default_input.npy"))]),
        "two_outputs": (two_output_model(str(d / "two_outputs.onnx")),
                        [rng.standard_normal((5, 4)).astype(np.float32), rng.standard_normal(4).astype(np.float32)]),
    }


def run_script(model, inputs, tmp_path):
    """classify.py with `onnxruntime` resolving to grove; its outputs in order, and what it printed."""
    paths = []
    for i, x in enumerate(inputs):
        paths.append(str(tmp_path / f"in{i}.npy"))
        np.save(paths[-1], x)
    out = tmp_path / "script_out"
    out.mkdir()
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join(p for p in [SCRIPT_DIR, env.get("PYTHONPATH", "")] if p)
    res = subprocess.run([sys.executable, os.path.join(SCRIPT_DIR, "classify.py"), model, str(out)] + paths,
                         capture_output=True, text=True, cwd=tmp_path, env=env, timeout=300)
    assert res.returncode == 0, res.stderr[-3000:]
    count = len(list(out.glob("*.npy")))
    return [np.load(out / f"{i}.npy") for i in range(count)], res.stdout


def run_onnxruntime(model, names, inputs, tmp_path):
    """ONNX Runtime's outputs by name (bench/runners/ort_runner.js)."""
    if not os.path.isdir(ORT_NODE):
        pytest.skip(f"no ONNX Runtime at {ORT_NODE} (bench/peers/install.sh installs it)")
    out = tmp_path / "ort_out"
    out.mkdir()
    cmd = ["node", os.path.join(SRC, "bench", "runners", "ort_runner.js"), "--model", model, "--warmup", "0",
           "--runs", "1", "--outputs", str(out)]
    for name, x in zip(names, inputs):
        path = tmp_path / f"ort_{name}.npy"
        np.save(path, x)
        cmd += ["--input", f"{name}={path}"]
    res = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "GROVE_ORT_NODE": ORT_NODE},
                         timeout=300)
    assert res.returncode == 0, res.stderr[-2000:]
    return {p.stem: np.load(p) for p in out.glob("*.npy")}


@pytest.mark.parametrize("which", ["default", "two_outputs"])
def test_an_unmodified_onnxruntime_script_gives_onnxruntime_numbers(models, which, tmp_path):
    model, inputs = models[which]
    session = onnxruntime.InferenceSession(model)
    ours, printed = run_script(model, inputs, tmp_path)
    theirs = run_onnxruntime(model, [i.name for i in session.get_inputs()], inputs, tmp_path)
    names = [o.name for o in session.get_outputs()]
    assert len(ours) == len(names) and sorted(theirs) == sorted(names)
    for name, got in zip(names, ours):
        want = theirs[name]
        assert got.shape == want.shape and got.dtype == want.dtype, name
        assert np.abs(got - want).max() <= 1e-4 * max(1.0, float(np.abs(want).max())), name
    if which == "two_outputs":
        assert "producer: grove-test" in printed and "graph: two_outputs" in printed
        assert "custom: [('purpose', 'api test')]" in printed


def test_node_args_name_shape_and_type(models):
    session = onnxruntime.InferenceSession(models["two_outputs"][0])
    a, b = session.get_inputs()
    assert (a.name, a.shape, a.type) == ("a", ["batch", 4], "tensor(float)")
    assert (b.name, b.shape, b.type) == ("b", [4], "tensor(float)")
    assert [o.name for o in session.get_outputs()] == ["sum", "scores"]
    assert repr(a) == "NodeArg(name='a', type='tensor(float)', shape=['batch', 4])"
    assert session.get_modelmeta().custom_metadata_map == {"purpose": "api test"}
    assert session.get_overridable_initializers() == []


def test_errors_are_one_line_and_name_what_is_wrong(models):
    model, inputs = models["two_outputs"]
    session = onnxruntime.InferenceSession(model)
    feed = {"a": inputs[0], "b": inputs[1]}
    with pytest.raises(grove.Error, match="no output named 'nope'; its outputs: sum, scores"):
        session.run(["nope"], feed)
    with pytest.raises(grove.Error, match="'c'"):
        session.run(None, {"a": inputs[0], "c": inputs[1]})
    with pytest.raises(grove.Error, match="GPU|CPU only|device 'cuda'"):
        onnxruntime.OrtValue.ortvalue_from_numpy(inputs[0], "cuda")
    with pytest.raises(grove.Error, match="no config entry 'x'"):
        onnxruntime.SessionOptions().get_session_config_entry("x")


def test_providers_other_than_the_cpu_are_left_out_with_a_warning(models):
    with warnings.catch_warnings(record=True) as seen:
        warnings.simplefilter("always")
        session = onnxruntime.InferenceSession(models["two_outputs"][0],
                                               providers=[("CUDAExecutionProvider", {}), "CPUExecutionProvider"])
    assert session.get_providers() == ["CPUExecutionProvider"]
    assert any("CUDAExecutionProvider" in str(w.message) for w in seen)
    assert session.end_profiling() == ""  # no profiling asked for


def test_threads_follow_intra_op_num_threads(models):
    options = onnxruntime.SessionOptions()
    options.intra_op_num_threads = 1
    session = onnxruntime.InferenceSession(models["default"][0], options)
    assert session._engine.threads == 1

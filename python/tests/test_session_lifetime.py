"""A Session dropped while its submitted runs are pending: every Future still gives the run's
outputs, on each execution path (one planned tile job; a Loop or If model run in segments,
each on a thread of its own; the reference executor for value-dependent shapes)."""
import gc
import os

import numpy as np
import pytest

import grove

onnx = pytest.importorskip("onnx")
from onnx import TensorProto, helper  # noqa: E402

SRC = os.environ.get("GROVE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
MODEL = os.path.join(SRC, "models", "default.onnx")
X = np.load(os.path.join(SRC, "models", "default_input.npy"))
EXPECTED = np.load(os.path.join(SRC, "models", "default_expected.npy"))


def save(graph, path):
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)])
    model.ir_version = 8
    onnx.save(model, str(path))
    return str(path)


def if_model(path):
    """y = If(c) then (x + x) * 3 else (x + x) - x."""
    then_g = helper.make_graph(
        [helper.make_node("Mul", ["xx", "three"], ["t"])], "then", [],
        [helper.make_tensor_value_info("t", TensorProto.FLOAT, [2])],
        [helper.make_tensor("three", TensorProto.FLOAT, [], [3.0])])
    else_g = helper.make_graph(
        [helper.make_node("Sub", ["xx", "x"], ["e"])], "else", [],
        [helper.make_tensor_value_info("e", TensorProto.FLOAT, [2])])
    g = helper.make_graph(
        [helper.make_node("Add", ["x", "x"], ["xx"]),
         helper.make_node("If", ["c"], ["y"], then_branch=then_g, else_branch=else_g)],
        "if",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("c", TensorProto.BOOL, [])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, [2])])
    return save(g, path)


def loop_model(path):
    """s = s0 + m * x, one planned job per iteration."""
    body = helper.make_graph(
        [helper.make_node("Add", ["s_in", "x"], ["s_out"]),
         helper.make_node("Identity", ["cond_in"], ["cond_out"])],
        "body",
        [helper.make_tensor_value_info("i", TensorProto.INT64, []),
         helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
         helper.make_tensor_value_info("s_in", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
         helper.make_tensor_value_info("s_out", TensorProto.FLOAT, [2])])
    g = helper.make_graph(
        [helper.make_node("Loop", ["m", "", "s0"], ["s"], body=body)],
        "loop",
        [helper.make_tensor_value_info("m", TensorProto.INT64, []),
         helper.make_tensor_value_info("x", TensorProto.FLOAT, [2]),
         helper.make_tensor_value_info("s0", TensorProto.FLOAT, [2])],
        [helper.make_tensor_value_info("s", TensorProto.FLOAT, [2])])
    return save(g, path)


def reshape_model(path):
    """y = Reshape(x, shape): y's shape is an input's value, so only the reference executor runs it."""
    g = helper.make_graph(
        [helper.make_node("Reshape", ["x", "shape"], ["y"])],
        "reshape",
        [helper.make_tensor_value_info("x", TensorProto.FLOAT, [6]),
         helper.make_tensor_value_info("shape", TensorProto.INT64, [2])],
        [helper.make_tensor_value_info("y", TensorProto.FLOAT, None)])
    return save(g, path)


@pytest.mark.parametrize("shared_engine", [False, True])
def test_planned_runs_outlive_their_session(shared_engine):
    engine = grove.Engine(threads=2) if shared_engine else None
    s = grove.Session(MODEL, engine=engine, threads=2)
    name = s.inputs[0]["name"]
    futures = [s.submit({name: X}) for _ in range(6)]
    del s, engine  # an engine made by the session goes with it unless its runs keep it
    gc.collect()
    for f in futures:
        y = next(iter(f.result().values()))
        assert np.allclose(y, EXPECTED, rtol=1e-3, atol=1e-4)


def test_segmented_if_runs_outlive_their_session(tmp_path):
    s = grove.Session(if_model(tmp_path / "if.onnx"), threads=2)
    futures = [s.submit({"x": np.array([1, i], np.float32), "c": np.array(i % 2 == 0)}) for i in range(8)]
    del s
    gc.collect()
    for i, f in enumerate(futures):
        want = [6, 6 * i] if i % 2 == 0 else [1, i]
        np.testing.assert_array_equal(f.result()["y"], np.array(want, np.float32))


def test_segmented_loop_runs_outlive_their_session(tmp_path):
    s = grove.Session(loop_model(tmp_path / "loop.onnx"), threads=2)
    futures = [s.submit({"m": np.array(200, np.int64), "x": np.array([1, i], np.float32),
                         "s0": np.array([0, 5], np.float32)}) for i in range(6)]
    del s
    gc.collect()
    for i, f in enumerate(futures):
        np.testing.assert_array_equal(f.result()["s"], np.array([200, 5 + 200 * i], np.float32))


def test_reference_runs_outlive_their_session(tmp_path):
    s = grove.Session(reshape_model(tmp_path / "reshape.onnx"), threads=2)
    x = np.arange(6, dtype=np.float32)
    futures = [s.submit({"x": x, "shape": np.array([3, 2], np.int64)}) for _ in range(6)]
    del s
    gc.collect()
    for f in futures:
        np.testing.assert_array_equal(f.result()["y"], x.reshape(3, 2))


def test_dropping_session_and_futures_together_is_safe(tmp_path):
    s = grove.Session(loop_model(tmp_path / "loop.onnx"), threads=2)
    futures = [s.submit({"m": np.array(200, np.int64), "x": np.array([1, 1], np.float32),
                         "s0": np.array([0, 0], np.float32)}) for _ in range(4)]
    del s, futures  # nothing reads them: each waits for its run, then lets the session go
    gc.collect()

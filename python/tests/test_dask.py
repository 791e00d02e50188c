"""grove.dask on a LocalCluster of two worker processes: the same numbers as one process, a
worker killed mid-job and the job still complete, and DataFrames (python3-distributed)."""
import os
import signal
import time

import numpy as np
import pytest

import grove

distributed = pytest.importorskip("distributed", reason="Dask distributed (Debian: python3-distributed)")
import dask.array as da  # noqa: E402
import dask.dataframe as dd  # noqa: E402
import pandas as pd  # noqa: E402

import grove.dask  # noqa: E402


def mlp(path, width, outputs, layers):
    """x [batch, width] -> `layers` MatMul+Relu of width x width -> MatMul to `outputs`."""
    import onnx
    from onnx import TensorProto, helper

    rng = np.random.default_rng(3)
    nodes, weights, last = [], [], "x"
    for i in range(layers):
        w = (rng.standard_normal((width, width)) / np.sqrt(width)).astype(np.float32)
        weights.append(helper.make_tensor(f"w{i}", TensorProto.FLOAT, w.shape, w.ravel()))
        nodes += [helper.make_node("MatMul", [last, f"w{i}"], [f"m{i}"]), helper.make_node("Relu", [f"m{i}"], [f"h{i}"])]
        last = f"h{i}"
    w = (rng.standard_normal((width, outputs)) / np.sqrt(width)).astype(np.float32)
    weights.append(helper.make_tensor("wo", TensorProto.FLOAT, w.shape, w.ravel()))
    nodes.append(helper.make_node("MatMul", [last, "wo"], ["y"]))
    graph = helper.make_graph(nodes, "mlp", [helper.make_tensor_value_info("x", TensorProto.FLOAT, ["batch", width])],
                              [helper.make_tensor_value_info("y", TensorProto.FLOAT, ["batch", outputs])], weights)
    onnx.save(helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)]), path)
    return path


@pytest.fixture(scope="module")
def models(tmp_path_factory):
    d = tmp_path_factory.mktemp("dask_models")
    return {"wide": mlp(str(d / "wide.onnx"), 512, 10, 8), "narrow": mlp(str(d / "narrow.onnx"), 8, 3, 2)}


@pytest.fixture(scope="module")
def client():
    cluster = distributed.LocalCluster(n_workers=2, threads_per_worker=1, processes=True, dashboard_address=None)
    c = distributed.Client(cluster)
    yield c
    c.close()
    cluster.close()


def per_partition(model, x, rows):
    """The model run in this process on the same partitions."""
    s = grove.Session(model, threads=1)
    return np.concatenate([s.run({"x": x[i:i + rows]})["y"] for i in range(0, len(x), rows)])


def test_a_dask_array_gives_what_one_process_gives(client, models):
    x = np.random.default_rng(0).standard_normal((4096, 512)).astype(np.float32)
    y = grove.dask.map_model(models["wide"], da.from_array(x, chunks=(256, 512))).compute()
    assert y.shape == (4096, 10) and y.dtype == np.float32
    np.testing.assert_array_equal(y, per_partition(models["wide"], x, 256))
    # Each worker loaded the model once and kept it.
    loaded = client.run(lambda dask_worker: len(getattr(dask_worker, "grove_state", {}).get("sessions", {})))
    assert sorted(loaded.values()) == [1, 1]


def test_a_worker_killed_mid_job_and_the_job_still_completes(client, models):
    x = np.random.default_rng(1).standard_normal((256 * 320, 512)).astype(np.float32)
    job = client.compute(grove.dask.map_model(models["wide"], da.from_array(x, chunks=(256, 512))))
    time.sleep(0.3)
    pids = client.run(os.getpid)
    assert not job.done(), "the job ended before a worker could be killed: make it longer"
    os.kill(next(iter(pids.values())), signal.SIGKILL)
    y = job.result(timeout=300)
    np.testing.assert_array_equal(y, per_partition(models["wide"], x, 256))
    deadline = time.time() + 60
    while len(client.scheduler_info()["workers"]) < 2 and time.time() < deadline:
        time.sleep(0.1)  # the nanny restarts the killed worker, for the tests after this one


def test_a_dask_dataframe_gets_the_outputs_as_columns(client, models):
    rng = np.random.default_rng(2)
    frame = pd.DataFrame(rng.standard_normal((1000, 8)).astype(np.float32), columns=[f"f{i}" for i in range(8)])
    out = grove.dask.map_dataframe(models["narrow"], dd.from_pandas(frame, npartitions=4)).compute()
    assert list(out.columns) == ["y_0", "y_1", "y_2"] and (out.index == frame.index).all()
    want = grove.Session(models["narrow"], threads=1).run({"x": frame.to_numpy()})["y"]
    np.testing.assert_allclose(out.to_numpy(), want, rtol=1e-5, atol=1e-6)


def test_bad_uses_are_one_line_errors(models):
    x = da.zeros((64, 512), chunks=(16, 256), dtype=np.float32)
    with pytest.raises(grove.Error, match="chunked along axis 0 only"):
        grove.dask.map_model(models["wide"], x)
    with pytest.raises(grove.Error, match="no output named 'z'"):
        grove.dask.map_model(models["wide"], x.rechunk((16, 512)), output_name="z")

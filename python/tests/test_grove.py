"""The Python module against the embedded default model and its stored PyTorch output."""
import os
import threading

import numpy as np
import pytest

import grove

SRC = os.environ.get("GROVE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))
MODEL = os.path.join(SRC, "models", "default.onnx")
X = np.load(os.path.join(SRC, "models", "default_input.npy"))
EXPECTED = np.load(os.path.join(SRC, "models", "default_expected.npy"))


def close_to_torch(y):
    return np.allclose(y, EXPECTED, rtol=1e-3, atol=1e-4)


@pytest.fixture(scope="module")
def engine():
    return grove.Engine(threads=2)


@pytest.fixture(scope="module")
def session(engine):
    return grove.Session(MODEL, engine=engine)


def input_name(s):
    return s.inputs[0]["name"]


def test_run_matches_pytorch(session):
    out = session.run({input_name(session): X})
    assert list(out) == [session.outputs[0]["name"]]
    y = out[session.outputs[0]["name"]]
    assert y.dtype == np.float32 and y.shape == EXPECTED.shape
    assert close_to_torch(y)


def test_check_agrees_and_names_a_differing_node(session):
    report = session.check({input_name(session): X})
    assert report["agrees"] and report["outputs"][0]["error"] < 1e-4
    assert "first_difference" not in report
    # Below float rounding every GEMM differs from the reference's double sums: the search
    # names the model's first Conv.
    strict = session.check(tolerance=1e-12)
    assert not strict["agrees"]
    first = strict["first_difference"]
    assert first["op"] == "Conv" and first["input_shapes"][0] == "[1, 3, 112, 112]", first
    assert first["planned_by"].startswith("node '"), first


def test_metadata(session):
    (inp,) = session.inputs
    assert inp["dtype"] == np.float32
    assert list(inp["shape"][1:]) == list(X.shape[1:])
    assert session.outputs[0]["dtype"] == np.float32
    assert session.path.endswith("default.onnx")
    assert session.engine.threads == 2


def test_outputs_are_not_copied_and_outlive_the_session(engine):
    s = grove.Session(MODEL, engine=engine)
    y = next(iter(s.run({input_name(s): X}).values()))
    assert not y.flags.owndata  # grove's buffer, kept alive by the array
    del s
    assert close_to_torch(y)


def test_non_contiguous_and_foreign_layouts_give_the_same_numbers(session):
    name = input_name(session)
    fortran = np.asfortranarray(X)
    strided = np.repeat(X, 2, axis=-1)[..., ::2]
    want = session.run({name: X})
    for x in (fortran, strided):
        got = session.run({name: x})
        for k in want:
            np.testing.assert_array_equal(got[k], want[k])


def test_submit_many_in_flight_equal_run(session):
    name = input_name(session)
    want = next(iter(session.run({name: X}).values()))
    futures = [session.submit({name: X * (1 + i % 2)}) for i in range(16)]
    for i, f in enumerate(futures):
        got = next(iter(f.result().values()))
        if i % 2 == 0:
            np.testing.assert_array_equal(got, want)
    assert all(f.done() for f in futures)


def test_dropping_an_unfinished_future_is_safe(session):
    name = input_name(session)
    for _ in range(8):
        session.submit({name: X.copy()})  # dropped at once: waits for its run, frees its input


def test_python_threads_share_the_engine(engine):
    sessions = [grove.Session(MODEL, engine=engine) for _ in range(2)]
    results, errors = [], []

    def work(s):
        try:
            for _ in range(5):
                results.append(next(iter(s.run({input_name(s): X}).values())))
        except Exception as e:  # pragma: no cover - reported below
            errors.append(e)

    threads = [threading.Thread(target=work, args=(sessions[i % 2],)) for i in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors
    assert len(results) == 20
    for y in results:
        np.testing.assert_array_equal(y, results[0])


def test_elastic_engine_resizes_while_runs_are_in_flight():
    engine = grove.Engine(threads=1, max_threads=3)
    assert (engine.threads, engine.max_threads) == (1, 3)
    session = grove.Session(MODEL, engine=engine)
    name = input_name(session)
    want = next(iter(session.run({name: X}).values()))
    pending = []
    for i in range(12):
        assert engine.set_workers(1 + i % 3) == 1 + i % 3
        pending.append(session.submit({name: X}))
    for f in pending:
        np.testing.assert_array_equal(next(iter(f.result().values())), want)
    assert engine.set_workers(0) == 1 and engine.set_workers(99) == 3


def test_reference_executor_agrees(session):
    name = input_name(session)
    fast = next(iter(session.run({name: X}).values()))
    ref = next(iter(session.run_reference({name: X}).values()))
    assert np.allclose(fast, ref, rtol=1e-3, atol=1e-4)


def test_barrier_schedule_same_numbers(engine, session):
    barrier = grove.Session(MODEL, engine=engine, schedule="barrier")
    name = input_name(session)
    a = next(iter(session.run({name: X}).values()))
    b = next(iter(barrier.run({name: X}).values()))
    np.testing.assert_array_equal(a, b)


def test_fixed_tile_counts_agree(engine, session):
    fixed = grove.Session(MODEL, engine=engine, tile_counts="fixed")
    name = input_name(session)
    a = next(iter(session.run({name: X}).values()))
    b = next(iter(fixed.run({name: X}).values()))
    np.testing.assert_allclose(a, b, rtol=1e-5, atol=1e-6)
    with pytest.raises(grove.Error, match="tile_counts"):
        grove.Session(MODEL, engine=engine, tile_counts="waves")


def test_bf16_precision_close_to_fp32(engine, session):
    # bf16 products where the CPU has AVX512-BF16, fp32 elsewhere: close to fp32 either way.
    bf16 = grove.Session(MODEL, engine=engine, precision="bf16")
    name = input_name(session)
    a = next(iter(session.run({name: X}).values()))
    b = next(iter(bf16.run({name: X}).values()))
    assert np.abs(a - b).max() <= 2e-2 * np.abs(a).max()


def test_tuning_off_and_a_damaged_record_named_by_path(engine, session, tmp_path):
    # tuning="off" plans by the hand rules: the same numbers as the default session.
    off = grove.Session(MODEL, engine=engine, tuning="off")
    name = input_name(session)
    a = next(iter(session.run({name: X}).values()))
    b = next(iter(off.run({name: X}).values()))
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    bad = tmp_path / "bad.record"
    bad.write_text("not a tuning record\n")
    with pytest.raises(grove.Error, match="bad.record"):
        grove.Session(MODEL, engine=engine, tuning=str(bad)).run({name: X})


def test_layout_nchw_gives_the_same_numbers(engine, session):
    # layout="nchw" keeps every conv as written; channels-last convs compute the same outputs.
    nchw = grove.Session(MODEL, engine=engine, layout="nchw")
    name = input_name(session)
    a = next(iter(session.run({name: X}).values()))
    b = next(iter(nchw.run({name: X}).values()))
    np.testing.assert_allclose(a, b, rtol=1e-4, atol=1e-5)
    with pytest.raises(grove.Error, match="layout"):
        grove.Session(MODEL, engine=engine, layout="nchwc")


def test_run_alone_gives_the_same_bits(engine, session):
    # run_alone="on" runs every tile on the calling thread, "off" shares them: the same plan,
    # so the same bits as the default session, whichever way it learnt.
    name = input_name(session)
    a = next(iter(session.run({name: X}).values()))
    for mode in ("on", "off"):
        b = next(iter(grove.Session(MODEL, engine=engine, run_alone=mode).run({name: X}).values()))
        np.testing.assert_array_equal(a, b)
    with pytest.raises(grove.Error, match="run_alone"):
        grove.Session(MODEL, engine=engine, run_alone="maybe")


def test_bench(session):
    r = session.bench(runs=3, warmup=1)
    assert r["runs"] == 3 and len(r["times_ms"]) == 3
    assert 0 < r["min_ms"] <= r["p50_ms"] <= r["max_ms"]


def test_errors_are_grove_errors_with_one_line(session, tmp_path):
    name = input_name(session)
    cases = [
        (lambda: session.run({"nope": X}), "nope"),
        (lambda: session.run({name: X.astype(np.float64)}), name),
        (lambda: session.run({name: X[..., :3]}), name),
        (lambda: session.run({name: np.array(["a"])}), name),
        (lambda: grove.Session(str(tmp_path / "missing.onnx")), "missing.onnx"),
        (lambda: grove.Session(MODEL, schedule="fast"), "schedule"),
        (lambda: grove.Session(MODEL, precision="fp16"), "precision"),
        (lambda: grove.Session(MODEL, prune="prune x channels=2"), "grove.antidote line 1"),
    ]
    corrupt = tmp_path / "corrupt.onnx"
    corrupt.write_bytes(open(MODEL, "rb").read()[:200])
    cases.append((lambda: grove.Session(str(corrupt)), "corrupt.onnx"))
    for call, word in cases:
        with pytest.raises(grove.Error) as e:
            call()
        message = str(e.value)
        assert word in message, message
        assert "\n" not in message.strip(), message
    assert issubclass(grove.Error, RuntimeError)


def test_prune_off_runs_the_model_and_a_map_no_conv_reads_is_refused(engine):
    s = grove.Session(MODEL, engine=engine, prune="off")
    assert close_to_torch(s.run({"image": X})["logits"])
    # The embedded ResNet's block outputs feed convs and residual Adds: nothing to skip there.
    inner = "/stages/stages.0/relu/Relu_output_0"  # read by one Conv only: prunable
    pruned = grove.Session(MODEL, engine=engine, prune=f"prune {inner} channels=0.5").run({"image": X})["logits"]
    assert pruned.shape == EXPECTED.shape and not close_to_torch(pruned)
    # A block output feeds a Conv and a residual Add: the Add reads it masked.
    block = grove.Session(MODEL, engine=engine, prune="prune /stages/stages.0/relu_1/Relu_output_0 channels=0.5")
    assert not close_to_torch(block.run({"image": X})["logits"])
    s = grove.Session(MODEL, engine=engine, prune="prune /stages/stages.7/relu_1/Relu_output_0 channels=0.5")
    with pytest.raises(grove.Error, match="no 2-D Conv of one group reads it"):
        s.run({"image": X})


def test_dynamic_session_slices_a_plain_model(engine):
    d = grove.DynamicSession(MODEL, engine=engine, ratios=[1.0, 0.5])
    names = [s["name"] for s in d.subnets]
    assert names == ["0.5", "1"]
    assert d.subnets[0]["flops"] < d.subnets[1]["flops"]
    feeds = {"image": X}
    assert close_to_torch(d.run(feeds, "1")["logits"])  # width 1 is the model itself
    half = d.run(feeds, 0)["logits"]
    assert half.shape == EXPECTED.shape and not close_to_torch(half)
    out, chosen = d.run_within(feeds, 1e6)  # no target it could miss: the widest
    assert chosen == "1" and close_to_torch(out["logits"])
    with pytest.raises(grove.Error, match="no sub-net named 'wide'"):
        d.run(feeds, "wide")
    with pytest.raises(grove.Error, match="not a dynamic model"):
        grove.DynamicSession(MODEL, engine=engine)

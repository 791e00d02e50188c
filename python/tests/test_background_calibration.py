"""grove.Engine calibrates the shipped performance model while it is idle (docs/tuning.md): it
starts measuring once the engine has had no run for calibrate_when_idle seconds, does nothing
where the machine has a model, is off with 0, and a dropped engine stops it without installing
anything. The whole calibration (50 layers, about a minute) is the C++ tests' to run; these
check what Python adds."""
import gc
import os
import time

import pytest

import grove

SRC = os.environ.get("GROVE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))


@pytest.fixture
def tune_dir(tmp_path, monkeypatch):
    monkeypatch.setenv("GROVE_TUNE_DIR", str(tmp_path))
    return tmp_path


def wait_for(engine, predicate, seconds=60):
    until = time.monotonic() + seconds
    status = engine.calibration_status()
    while time.monotonic() < until and not predicate(status):
        time.sleep(0.02)
        status = engine.calibration_status()
    return status


def test_an_idle_engine_starts_measuring_and_a_dropped_one_installs_nothing(tune_dir):
    engine = grove.Engine(threads=1, calibrate_when_idle=0.05)
    status = wait_for(engine, lambda s: s["layers_measured"] >= 1 or s["state"] in ("not needed", "failed"))
    if status["state"] == "not needed":
        pytest.skip(status["detail"])
    assert status["layers_measured"] >= 1, status
    assert status["layers_total"] >= 25, status
    assert status["model_path"].startswith(str(tune_dir)), status
    session = grove.Session(os.path.join(SRC, "models", "default.onnx"), engine=engine)
    started = time.monotonic()
    del session, engine
    gc.collect()
    assert time.monotonic() - started < 30, "dropping the engine waited for the calibration"
    assert list(tune_dir.rglob("conv.perfmodel")) == []


def test_off_with_zero_and_not_needed_where_the_machine_has_a_model(tune_dir):
    assert grove.Engine(threads=1, calibrate_when_idle=0).calibration_status() is None
    waiting = grove.Engine(threads=1, calibrate_when_idle=3600)
    path = wait_for(waiting, lambda s: s["model_path"])["model_path"]
    assert path.startswith(str(tune_dir)) and path.endswith("conv.perfmodel"), path
    assert waiting.calibration_status()["state"] in ("waiting", "not needed")
    del waiting
    gc.collect()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w") as f:
        f.write("the machine's own model\n")
    engine = grove.Engine(threads=1, calibrate_when_idle=0.05)
    status = wait_for(engine, lambda s: s["state"] != "waiting")
    assert status["state"] == "not needed", status
    assert "this machine has a performance model" in status["detail"]
    with open(path) as f:
        assert f.read() == "the machine's own model\n"

"""grove: ONNX models on CPUs, every operator cut into tiles run by one barrier-free dataflow runtime.

grove's own API (docs/python.md): Engine, Session, DynamicSession, Future, Error, from the
extension module grove._grove. ONNX Runtime's Python API over it (grove/onnxruntime_api.py):
InferenceSession, SessionOptions, RunOptions and the rest, so that a script written for
onnxruntime runs with `import grove as onnxruntime`.
"""
from . import _grove
from ._grove import BackgroundCalibration, DynamicSession, Error, Future, Session, __version__
from .onnxruntime_api import (
    ExecutionMode,
    ExecutionOrder,
    GraphOptimizationLevel,
    InferenceSession,
    IOBinding,
    ModelMetadata,
    NodeArg,
    OrtValue,
    RunOptions,
    SessionIOBinding,
    SessionOptions,
    get_all_providers,
    get_available_providers,
    get_build_info,
    get_device,
    get_version_string,
    set_default_logger_severity,
    set_seed,
)


class Engine(_grove.Engine):
    """The workers (one per core) shared by every Session given this engine.

    threads=0: the cores this process may use; max_threads: workers started, the most
    set_workers() can activate (0: threads). An engine kept alive calibrates the performance
    model shipped for this ISA to this machine once it has had no run for
    calibrate_when_idle seconds, on idle cores (docs/tuning.md); 0: never.
    """

    def __init__(self, threads=0, max_threads=0, calibrate_when_idle=10.0):
        super().__init__(threads, max_threads)
        self._calibration = BackgroundCalibration(self, calibrate_when_idle) if calibrate_when_idle > 0 else None

    def calibration_status(self):
        """The background calibration's {state, detail, model_path, layers_measured, layers_total, interruptions}, or None."""
        return self._calibration.status() if self._calibration else None

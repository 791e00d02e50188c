"""grove: ONNX models on CPUs, every operator cut into tiles run by one barrier-free dataflow runtime.

grove's own API (docs/python.md): Engine, Session, DynamicSession, Future, Error, from the
extension module grove._grove. ONNX Runtime's Python API over it (grove/onnxruntime_api.py):
InferenceSession, SessionOptions, RunOptions and the rest, so that a script written for
onnxruntime runs with `import grove as onnxruntime`.
"""
from ._grove import DynamicSession, Engine, Error, Future, Session, __version__
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

"""ONNX Runtime's Python API (onnxruntime 1.20's documented surface) over grove.Session.

A script written for onnxruntime runs unchanged with `import grove as onnxruntime`: sessions
from a path or bytes, run(output_names, input_feed) returning a list, get_inputs() and
get_outputs() as NodeArgs, get_modelmeta(), SessionOptions (intra_op_num_threads picks the
engine's workers; enable_profiling writes grove's tile trace, which Perfetto and
chrome://tracing open, where ONNX Runtime writes its own), IOBinding and OrtValue on the CPU.
What grove has no equivalent for is accepted and has no effect (graph_optimization_level,
execution_mode, inter_op_num_threads, memory-arena switches, log levels: grove always plans
the whole graph and runs it barrier-free); providers other than CPUExecutionProvider are
left out with a warning, as ONNX Runtime does for providers it was not built with.
"""
import enum
import os
import tempfile
import time
import warnings

import numpy as np

from . import _grove

_PROVIDER = "CPUExecutionProvider"

# NumPy dtype name -> the element type in ONNX Runtime's type strings ('tensor(float)').
_ONNX_ELEMENT = {
    "float32": "float", "float64": "double", "float16": "float16", "int8": "int8", "uint8": "uint8",
    "int16": "int16", "uint16": "uint16", "int32": "int32", "uint32": "uint32", "int64": "int64",
    "uint64": "uint64", "bool": "bool", "string": "string", "bfloat16": "bfloat16",
}


class GraphOptimizationLevel(enum.IntEnum):
    ORT_DISABLE_ALL = 0
    ORT_ENABLE_BASIC = 1
    ORT_ENABLE_EXTENDED = 2
    ORT_ENABLE_ALL = 99


class ExecutionMode(enum.IntEnum):
    ORT_SEQUENTIAL = 0
    ORT_PARALLEL = 1


class ExecutionOrder(enum.IntEnum):
    DEFAULT = 0
    PRIORITY_BASED = 1
    MEMORY_EFFICIENT = 2


class SessionOptions:
    """The options of an InferenceSession; see the module's docstring for what each does here."""

    def __init__(self):
        self.intra_op_num_threads = 0  # 0: one worker per core this process may use
        self.inter_op_num_threads = 0
        self.graph_optimization_level = GraphOptimizationLevel.ORT_ENABLE_ALL
        self.execution_mode = ExecutionMode.ORT_SEQUENTIAL
        self.execution_order = ExecutionOrder.DEFAULT
        self.enable_profiling = False
        self.profile_file_prefix = "onnxruntime_profile_"
        self.optimized_model_filepath = ""
        self.enable_cpu_mem_arena = True
        self.enable_mem_pattern = True
        self.enable_mem_reuse = True
        self.use_deterministic_compute = False
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.logid = ""
        self._config = {}
        self._free_dimensions = {}

    def add_session_config_entry(self, key, value):
        self._config[str(key)] = str(value)

    def get_session_config_entry(self, key):
        if key not in self._config:
            raise _grove.Error(f"SessionOptions: no config entry '{key}'")
        return self._config[key]

    def add_free_dimension_override_by_name(self, dim_name, dim_value):
        self._free_dimensions[str(dim_name)] = int(dim_value)

    def add_initializer(self, name, value):
        raise _grove.Error("SessionOptions.add_initializer is not supported by grove; feed the value as an input")

    def register_custom_ops_library(self, library_path):
        raise _grove.Error(f"custom op libraries are not supported by grove: {library_path}")


class RunOptions:
    def __init__(self):
        self.log_severity_level = 2
        self.log_verbosity_level = 0
        self.logid = ""
        self.run_tag = ""
        self.terminate = False
        self.only_execute_path_to_fetches = False
        self._config = {}

    def add_run_config_entry(self, key, value):
        self._config[str(key)] = str(value)

    def get_run_config_entry(self, key):
        if key not in self._config:
            raise _grove.Error(f"RunOptions: no config entry '{key}'")
        return self._config[key]


class NodeArg:
    """An input or output: name, shape (ints, a dimension's name where it is symbolic, None
    where unnamed) and type ('tensor(float)')."""

    def __init__(self, name, shape, type):
        self.name, self.shape, self.type = name, shape, type

    def __repr__(self):
        return f"NodeArg(name='{self.name}', type='{self.type}', shape={self.shape})"


class ModelMetadata:
    def __init__(self, meta):
        self.producer_name = meta["producer_name"]
        self.graph_name = meta["graph_name"]
        self.domain = meta["domain"]
        self.description = meta["description"]
        self.graph_description = meta["graph_description"]
        self.version = meta["version"]
        self.custom_metadata_map = dict(meta["custom"])


class OrtValue:
    """A tensor on the CPU: a NumPy array underneath."""

    def __init__(self, array):
        self._array = array

    @staticmethod
    def ortvalue_from_numpy(numpy_obj, device_type="cpu", device_id=0):
        _cpu_only(device_type)
        return OrtValue(np.ascontiguousarray(numpy_obj))

    @staticmethod
    def ortvalue_from_shape_and_type(shape, element_type, device_type="cpu", device_id=0):
        _cpu_only(device_type)
        return OrtValue(np.zeros(shape, dtype=element_type))

    def numpy(self):
        return self._array

    def shape(self):
        return list(self._array.shape)

    def data_type(self):
        return _type_string(self._array.dtype)

    def element_type(self):
        return self._array.dtype.type

    def device_name(self):
        return "cpu"

    def has_value(self):
        return True

    def is_tensor(self):
        return True


class IOBinding:
    """Inputs and outputs bound ahead of InferenceSession.run_with_iobinding, on the CPU."""

    def __init__(self, session):
        self._session = session
        self._inputs = {}
        self._output_names = []
        self._outputs = []

    def bind_cpu_input(self, name, arr_on_cpu):
        self._inputs[name] = np.ascontiguousarray(arr_on_cpu)

    def bind_ortvalue_input(self, name, ortvalue):
        self._inputs[name] = ortvalue.numpy()

    def bind_input(self, name, device_type, device_id, element_type, shape, buffer_ptr):
        raise _grove.Error("IOBinding.bind_input with a raw buffer is not supported by grove; use bind_cpu_input")

    def bind_output(self, name, device_type="cpu", device_id=0, element_type=None, shape=None, buffer_ptr=None):
        _cpu_only(device_type)
        if buffer_ptr is not None:
            raise _grove.Error("IOBinding.bind_output into a raw buffer is not supported by grove")
        self._output_names.append(name)

    def bind_ortvalue_output(self, name, ortvalue):
        self._output_names.append(name)

    def synchronize_inputs(self):
        pass

    def synchronize_outputs(self):
        pass

    def get_outputs(self):
        return [OrtValue(a) for a in self._outputs]

    def copy_outputs_to_cpu(self):
        return list(self._outputs)

    def clear_binding_inputs(self):
        self._inputs = {}

    def clear_binding_outputs(self):
        self._output_names = []
        self._outputs = []


SessionIOBinding = IOBinding


class InferenceSession:
    """One model, as onnxruntime.InferenceSession: planned by grove, run barrier-free."""

    def __init__(self, path_or_bytes, sess_options=None, providers=None, provider_options=None, **kwargs):
        self._options = sess_options if sess_options is not None else SessionOptions()
        self._providers = _cpu_providers(providers)
        self._profiling_start_ns = 0
        engine = _grove.Engine(threads=max(0, int(self._options.intra_op_num_threads or 0)))
        if self._options.enable_profiling:
            self._profiling_start_ns = time.time_ns()
            engine.start_trace()
        if isinstance(path_or_bytes, (bytes, bytearray, memoryview)):
            # grove loads from a file: the bytes go to a private temporary one, removed once
            # loaded (the weights are read or mapped by then).
            fd, tmp = tempfile.mkstemp(suffix=".onnx")
            try:
                with os.fdopen(fd, "wb") as f:
                    f.write(bytes(path_or_bytes))
                self._session = _grove.Session(tmp, engine=engine)
            finally:
                os.unlink(tmp)
            self._model_path = ""
        else:
            self._model_path = os.fspath(path_or_bytes)
            self._session = _grove.Session(self._model_path, engine=engine)
        self._engine = engine
        self._inputs = [_node_arg(v, self._options._free_dimensions) for v in self._session.inputs]
        self._outputs = [_node_arg(v, {}) for v in self._session.outputs]

    def run(self, output_names, input_feed, run_options=None):
        if run_options is not None and run_options.terminate:
            raise _grove.Error("run: RunOptions.terminate is set")
        feeds = {}
        for name, value in dict(input_feed).items():
            feeds[name] = value.numpy() if isinstance(value, OrtValue) else np.asarray(value)
        outputs = self._session.run(feeds)
        return [outputs[n] for n in self._output_names(output_names)]

    def run_with_ort_values(self, output_names, input_dict_ort_values, run_options=None):
        return [OrtValue(a) for a in self.run(output_names, input_dict_ort_values, run_options)]

    def run_with_iobinding(self, iobinding, run_options=None):
        iobinding._outputs = self.run(iobinding._output_names or None, iobinding._inputs, run_options)

    def io_binding(self):
        return IOBinding(self)

    def get_inputs(self):
        return list(self._inputs)

    def get_outputs(self):
        return list(self._outputs)

    def get_overridable_initializers(self):
        return []

    def get_modelmeta(self):
        return ModelMetadata(self._session.metadata)

    def get_providers(self):
        return list(self._providers)

    def get_provider_options(self):
        return {p: {} for p in self._providers}

    def set_providers(self, providers=None, provider_options=None):
        self._providers = _cpu_providers(providers)

    def get_session_options(self):
        return self._options

    def get_profiling_start_time_ns(self):
        return self._profiling_start_ns

    def end_profiling(self):
        """Writes the tiles run since the session was made (grove's trace: one track per
        worker, a slice per tile) to PREFIX_DATE.json and returns that name; "" without
        enable_profiling, as in ONNX Runtime."""
        if not self._options.enable_profiling or not self._profiling_start_ns:
            return ""
        name = f"{self._options.profile_file_prefix}_{time.strftime('%Y-%m-%d_%H-%M-%S')}.json"
        with open(name, "w") as f:
            f.write(self._engine.stop_trace_json())
        self._profiling_start_ns = 0
        return name

    def _output_names(self, output_names):
        known = [o.name for o in self._outputs]
        if not output_names:
            return known
        for n in output_names:
            if n not in known:
                raise _grove.Error(f"run: the model has no output named '{n}'; its outputs: {', '.join(known)}")
        return list(output_names)


def _cpu_only(device_type):
    if str(device_type).lower() != "cpu":
        raise _grove.Error(f"device '{device_type}': grove runs on the CPU only")


def _cpu_providers(providers):
    if providers is None:
        return [_PROVIDER]
    names = [p[0] if isinstance(p, (tuple, list)) else p for p in providers]
    dropped = [n for n in names if n != _PROVIDER]
    if dropped:
        warnings.warn(f"grove runs on the CPU: providers {dropped} are not available; using {_PROVIDER}")
    return [_PROVIDER]


def _type_string(dtype):
    name = dtype if isinstance(dtype, str) else np.dtype(dtype).name
    return f"tensor({_ONNX_ELEMENT.get(name, name)})"


def _node_arg(spec, free_dimensions):
    shape = spec["shape"]
    if shape is not None:
        shape = [free_dimensions.get(d, d) if isinstance(d, str) else d for d in shape]
    return NodeArg(spec["name"], shape, _type_string(spec["dtype"]))


def get_available_providers():
    return [_PROVIDER]


def get_all_providers():
    return [_PROVIDER]


def get_device():
    return "CPU"


def get_version_string():
    return _grove.__version__


def get_build_info():
    return f"grove {_grove.__version__}, CPU only"


def set_default_logger_severity(severity):
    pass


def set_seed(seed):
    pass

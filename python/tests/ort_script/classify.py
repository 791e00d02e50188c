"""A script written against ONNX Runtime's documented Python API, unchanged: the test runs it
with `onnxruntime` resolving to grove (python/tests/ort_script/onnxruntime.py).

    classify.py MODEL OUT_DIR INPUT.npy ...   (one .npy per model input, in order)

Writes each output as OUT_DIR/<index>.npy and prints the model's metadata."""
import os
import sys

import numpy as np
import onnxruntime as ort

model_path, out_dir, input_paths = sys.argv[1], sys.argv[2], sys.argv[3:]

options = ort.SessionOptions()
options.intra_op_num_threads = 2
options.inter_op_num_threads = 1
options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
options.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
options.enable_profiling = True
assert "CPUExecutionProvider" in ort.get_available_providers()
session = ort.InferenceSession(model_path, sess_options=options, providers=["CPUExecutionProvider"])
assert session.get_providers() == ["CPUExecutionProvider"]

inputs = session.get_inputs()
assert len(inputs) == len(input_paths)
feed = {}
for node_arg, path in zip(inputs, input_paths):
    array = np.load(path)
    assert node_arg.type == "tensor(float)", node_arg.type
    assert len(node_arg.shape) == array.ndim
    for dim, size in zip(node_arg.shape, array.shape):
        assert dim == size or isinstance(dim, str) or dim is None, (node_arg.shape, array.shape)
    feed[node_arg.name] = array
output_names = [o.name for o in session.get_outputs()]

outputs = session.run(None, feed)
assert isinstance(outputs, list) and len(outputs) == len(output_names)
last_first = session.run(output_names[::-1], feed)
for a, b in zip(last_first, outputs[::-1]):
    np.testing.assert_array_equal(a, b)

run_options = ort.RunOptions()
run_options.log_severity_level = 3
np.testing.assert_array_equal(session.run([output_names[0]], feed, run_options)[0], outputs[0])

binding = session.io_binding()
for name, array in feed.items():
    binding.bind_cpu_input(name, array)
for name in output_names:
    binding.bind_output(name)
session.run_with_iobinding(binding)
for a, b in zip(binding.copy_outputs_to_cpu(), outputs):
    np.testing.assert_array_equal(a, b)

values = session.run_with_ort_values(output_names, {k: ort.OrtValue.ortvalue_from_numpy(v) for k, v in feed.items()})
np.testing.assert_array_equal(values[0].numpy(), outputs[0])

with open(model_path, "rb") as f:
    from_bytes = ort.InferenceSession(f.read(), providers=ort.get_available_providers())
np.testing.assert_array_equal(from_bytes.run(None, feed)[0], outputs[0])

profile = session.end_profiling()
assert profile and os.path.getsize(profile) > 0

meta = session.get_modelmeta()
print("producer:", meta.producer_name)
print("graph:", meta.graph_name)
print("custom:", sorted(meta.custom_metadata_map.items()))
for i, out in enumerate(outputs):
    np.save(os.path.join(out_dir, f"{i}.npy"), out)

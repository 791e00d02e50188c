#!/usr/bin/python3
"""Checks `grove run` on float16-converted models, written the way onnxconverter-common's
convert_float_to_float16 writes them (that package is not in Debian): every float weight
stored as float16, activations float16 (and the same in bfloat16 with float32 inputs and
outputs, within 4e-2), and either

  - keep_io_types: float32 input -> Cast(to=float16) -> ... -> Cast(to=float32) -> output, or
  - float16 input and output declared as such.

A small CNN + MLP is built in PyTorch and exported. grove must give outputs of the declared
dtype within float16 tolerance of the float model: max|grove - torch| <= 1e-2 * max|torch|.
Exits 1 on any failure. Usage: float16_model_test.py --grove build/grove [--grove-args "..."]
"""
import argparse
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

TOLERANCE = 1e-2
# bfloat16 keeps 8 significant bits to float16's 11: every rounding point is 8x coarser.
BF16_TOLERANCE = 4e-2


def build_float_model(torch):
    torch.manual_seed(1)
    nn = torch.nn
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
        nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.Sigmoid(),
        nn.Flatten(),
        nn.Linear(16 * 6 * 6, 24), nn.ReLU(),
        nn.Linear(24, 10)).eval()


def to_bfloat16_tensor(a, name):
    """A float32 array as a BFLOAT16 initializer: the upper 16 bits, rounded half to even."""
    bits = np.ascontiguousarray(a, dtype=np.float32).view(np.uint32).astype(np.uint64)
    rounded = ((bits + 0x7FFF + ((bits >> 16) & 1)) >> 16).astype(np.uint16)
    t = onnx.TensorProto()
    t.name = name
    t.data_type = TensorProto.BFLOAT16
    t.dims.extend(a.shape)
    t.raw_data = rounded.tobytes()
    return t


def to_float16(model, keep_io_types, elem_type=TensorProto.FLOAT16):
    """The model with float weights and activations in float16 (or bfloat16, keep_io_types only:
    numpy has no bfloat16 for the inputs and outputs)."""
    g = model.graph
    inits = []
    for t in g.initializer:
        a = numpy_helper.to_array(t)
        if a.dtype != np.float32:
            inits.append(t)
        elif elem_type == TensorProto.FLOAT16:
            inits.append(numpy_helper.from_array(a.astype(np.float16), t.name))
        else:
            inits.append(to_bfloat16_tensor(a, t.name))
    nodes, inputs, outputs = [], [], []
    for vi in g.input:
        if keep_io_types:
            inputs.append(vi)
            nodes.append(helper.make_node("Cast", [vi.name], [vi.name + "_half"], vi.name + "_to_half",
                                          to=elem_type))
        else:
            vi = onnx.ValueInfoProto.FromString(vi.SerializeToString())
            vi.type.tensor_type.elem_type = TensorProto.FLOAT16
            inputs.append(vi)
    for n in g.node:
        n = onnx.NodeProto.FromString(n.SerializeToString())
        if keep_io_types:
            n.input[:] = [i + "_half" if any(i == v.name for v in g.input) else i for i in n.input]
            n.output[:] = [o + "_half" if any(o == v.name for v in g.output) else o for o in n.output]
        nodes.append(n)
    for vi in g.output:
        if keep_io_types:
            outputs.append(vi)
            nodes.append(helper.make_node("Cast", [vi.name + "_half"], [vi.name], vi.name + "_to_float",
                                          to=TensorProto.FLOAT))
        else:
            vi = onnx.ValueInfoProto.FromString(vi.SerializeToString())
            vi.type.tensor_type.elem_type = TensorProto.FLOAT16
            outputs.append(vi)
    graph = helper.make_graph(nodes, g.name + "_fp16", inputs, outputs, inits)
    m = helper.make_model(graph, opset_imports=list(model.opset_import))
    onnx.checker.check_model(m)
    return m


def main(argv=None):
    ap = argparse.ArgumentParser()
    ap.add_argument("--grove", required=True)
    ap.add_argument("--grove-args", default="")
    args = ap.parse_args(argv)
    import torch

    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        net = build_float_model(torch)
        torch.onnx.export(net, torch.zeros(1, 3, 12, 12), tmp / "float.onnx", input_names=["input"],
                          output_names=["logits"], opset_version=13)
        rng = np.random.default_rng(0)
        x = rng.standard_normal((1, 3, 12, 12)).astype(np.float32)
        with torch.no_grad():
            ref = net(torch.from_numpy(x)).numpy()
        for keep_io_types, elem_type in ((True, TensorProto.FLOAT16), (False, TensorProto.FLOAT16),
                                         (True, TensorProto.BFLOAT16)):
            name = ("bf16" if elem_type == TensorProto.BFLOAT16 else "fp16") + ("_keep_io" if keep_io_types else "_io")
            onnx.save(to_float16(onnx.load(tmp / "float.onnx"), keep_io_types, elem_type), tmp / f"{name}.onnx")
            feed = x if keep_io_types else x.astype(np.float16)
            np.save(tmp / f"{name}_in.npy", feed)
            out_dir = tmp / f"out_{name}"
            cmd = [args.grove, "run", str(tmp / f"{name}.onnx"), "--input", f"input={tmp / f'{name}_in.npy'}",
                   "--output", str(out_dir)] + shlex.split(args.grove_args)
            r = subprocess.run(cmd, capture_output=True, text=True)
            if r.returncode != 0:
                print(f"FAIL {name}: grove failed: {r.stderr.strip()}")
                failures += 1
                continue
            got = np.load(out_dir / "logits.npy")
            want_dtype = np.float32 if keep_io_types else np.float16
            err = float(np.abs(got.astype(np.float64) - ref).max())
            bound = (BF16_TOLERANCE if name.startswith("bf16") else TOLERANCE) * float(np.abs(ref).max())
            ok = got.dtype == want_dtype and got.shape == ref.shape and err <= bound
            failures += not ok
            print(f"{'ok' if ok else 'FAIL'} {name}: output {got.dtype}{got.shape} (want {np.dtype(want_dtype)}), "
                  f"max err vs float torch {err:.3g} (bound {bound:.3g})")
    print("passed" if failures == 0 else f"{failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

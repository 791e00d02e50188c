#!/usr/bin/python3
"""Checks `grove run` on a dynamically quantized model, the way ONNX Runtime's quantize_dynamic
writes one (onnxruntime's Python package is not in Debian, so the rewrite is done here):

    x -> DynamicQuantizeLinear -> (x_q, x_scale, x_zp)
    ConvInteger(x_q, W_q, x_zp, W_zp) / MatMulInteger(x_q, W_q, x_zp, W_zp) -> Cast(float)
      -> Mul(x_scale * W_scale) -> Add(bias)

with int8 symmetric weights (one conv per tensor, the others per output channel). A small
float CNN + MLP is built in PyTorch and exported; its Conv and Gemm nodes are rewritten.

Two checks per input case:
  - against a numpy evaluation of the same quantized graph: exactly (every op after the
    integer sums is one float32 operation, so the bits must agree), also on the quantized
    activations of the first DynamicQuantizeLinear, exposed as extra outputs;
  - against the float PyTorch model: within quantization tolerance,
    max|grove - torch| <= 0.05 * max|torch|.
Exits 1 on any failure. Usage: quantized_model_test.py --grove build/grove [--grove-args "..."]
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

sys.path.insert(0, str(Path(__file__).resolve().parent))
from quantize_dynamic import quantize_dynamic  # noqa: E402  (sibling module)

FLOAT_TOLERANCE = 0.05


def build_float_model(torch):
    torch.manual_seed(0)
    nn = torch.nn
    return nn.Sequential(
        nn.Conv2d(3, 8, 3, padding=1), nn.ReLU(),
        nn.Conv2d(8, 16, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(16, 16, 1), nn.ReLU(),
        nn.Flatten(),
        nn.Linear(16 * 6 * 6, 37), nn.ReLU(),
        nn.Linear(37, 10)).eval()


def quantize_graph(model):
    """quantize_dynamic's rewrite, plus the first DynamicQuantizeLinear's outputs as graph outputs."""
    q = quantize_dynamic(model, per_tensor_convs={1})
    first = next(n for n in q.graph.node if n.op_type == "DynamicQuantizeLinear")
    q.graph.output.extend([
        helper.make_tensor_value_info(first.output[0], TensorProto.UINT8, ["batch", 3, 12, 12]),
        helper.make_tensor_value_info(first.output[1], TensorProto.FLOAT, []),
        helper.make_tensor_value_info(first.output[2], TensorProto.UINT8, [])])
    onnx.checker.check_model(q)
    return q


# ---- numpy evaluation of the quantized graph (ONNX reference semantics, float32) ----

def dynamic_quantize(x):
    x_min = np.minimum(np.float32(0), x.min()).astype(np.float32)
    x_max = np.maximum(np.float32(0), x.max()).astype(np.float32)
    scale = np.float32(1) if x_max == x_min else np.float32((x_max - x_min) / np.float32(255))
    zp = np.rint(np.clip(np.float32(0) - x_min / scale, 0, 255)).astype(np.float32)
    y = np.clip(np.rint(x / scale) + zp, 0, 255).astype(np.uint8)
    return y, np.float32(scale), zp.astype(np.uint8)


def conv_integer(x, w, x_zp, w_zp, attrs):
    xs = x.astype(np.int64) - np.int64(x_zp)
    ws = w.astype(np.int64) - np.asarray(w_zp, np.int64).reshape(-1, 1, 1, 1)
    pads = attrs.get("pads", [0, 0, 0, 0])
    stride = attrs.get("strides", [1, 1])
    xs = np.pad(xs, ((0, 0), (0, 0), (pads[0], pads[2]), (pads[1], pads[3])))
    n, c, h, wd = xs.shape
    m, _, kh, kw = ws.shape
    oh, ow = (h - kh) // stride[0] + 1, (wd - kw) // stride[1] + 1
    out = np.zeros((n, m, oh, ow), np.int64)
    for i in range(kh):
        for j in range(kw):
            patch = xs[:, :, i:i + stride[0] * oh:stride[0], j:j + stride[1] * ow:stride[1]]
            out += np.einsum("nchw,mc->nmhw", patch, ws[:, :, i, j])
    return out.astype(np.int32)


def run_numpy(model, feeds):
    env = dict(feeds)
    env.update({t.name: numpy_helper.to_array(t) for t in model.graph.initializer})
    for node in model.graph.node:
        i = [env[name] for name in node.input]
        attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
        op = node.op_type
        if op == "DynamicQuantizeLinear":
            out = dynamic_quantize(i[0])
        elif op == "ConvInteger":
            out = (conv_integer(i[0], i[1], i[2], i[3], attrs),)
        elif op == "MatMulInteger":
            a = i[0].astype(np.int64) - np.int64(i[2])
            b = i[1].astype(np.int64) - i[3].astype(np.int64)
            out = ((a @ b).astype(np.int32),)
        elif op == "Cast":
            out = (i[0].astype(np.float32),)
        elif op == "Mul":
            out = (np.multiply(i[0], i[1], dtype=np.float32),)
        elif op == "Add":
            out = (np.add(i[0], i[1], dtype=np.float32),)
        elif op == "Relu":
            out = (np.maximum(i[0], np.float32(0)),)
        elif op == "Flatten":
            out = (i[0].reshape(i[0].shape[0], -1),)
        else:
            raise RuntimeError("numpy evaluator has no " + op)
        for name, value in zip(node.output, out):
            env[name] = np.asarray(value)
    return [env[o.name] for o in model.graph.output]


def run_grove(grove, extra_args, model_path, inputs, out_dir):
    cmd = [grove, "run", str(model_path), "--output", str(out_dir)] + extra_args
    for name, path in inputs.items():
        cmd += ["--input", f"{name}={path}"]
    r = subprocess.run(cmd, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError("grove failed: " + " ".join(cmd) + "\n" + r.stderr.strip())


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
                          output_names=["logits"], opset_version=13, dynamic_axes={"input": {0: "batch"},
                                                                                     "logits": {0: "batch"}})
        quantized = quantize_graph(onnx.load(tmp / "float.onnx"))
        onnx.save(quantized, tmp / "quantized.onnx")
        ops = sorted({n.op_type for n in quantized.graph.node})
        print("quantized graph ops:", ", ".join(ops))
        rng = np.random.default_rng(0)
        for case, batch in (("b1", 1), ("b3", 3)):
            x = rng.standard_normal((batch, 3, 12, 12)).astype(np.float32)
            np.save(tmp / f"{case}.npy", x)
            out_dir = tmp / f"out_{case}"
            try:
                run_grove(args.grove, shlex.split(args.grove_args), tmp / "quantized.onnx", {"input": tmp / f"{case}.npy"},
                          out_dir)
            except RuntimeError as e:
                print(f"FAIL {case}: {e}")
                failures += 1
                continue
            want = run_numpy(quantized, {"input": x})
            exact_failures = failures
            for o, w in zip(quantized.graph.output, want):
                got = np.load(out_dir / f"{o.name}.npy")
                if got.dtype != w.dtype or got.shape != w.shape or not np.array_equal(got, w):
                    diff = np.abs(got.astype(np.float64) - w.astype(np.float64)).max() if got.shape == w.shape else "shape"
                    print(f"FAIL {case}: output {o.name} differs from the numpy quantized graph "
                          f"({got.dtype}{got.shape} vs {w.dtype}{w.shape}, max diff {diff})")
                    failures += 1
            with torch.no_grad():
                ref = net(torch.from_numpy(x)).numpy()
            got = np.load(out_dir / "logits.npy")
            err, bound = float(np.abs(got - ref).max()), FLOAT_TOLERANCE * float(np.abs(ref).max())
            status = "ok" if err <= bound and failures == exact_failures else "FAIL"
            failures += err > bound
            exact = "bit-exact" if failures == exact_failures else "NOT exact"
            print(f"{status} {case}: {exact} vs numpy quantized graph; vs float torch max err {err:.4g} "
                  f"(bound {bound:.4g})")
    print("passed" if failures == 0 else f"{failures} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

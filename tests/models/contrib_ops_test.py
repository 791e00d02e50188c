#!/usr/bin/env python3
"""The com.microsoft contrib ops that ONNX Runtime's tools write into models (and its
ONNX-domain SimplifiedLayerNormalization), each in a one- or two-node model built with
onnx.helper, run by grove (2 threads, and the reference executor) and by ONNX Runtime
(onnxruntime-node) on the same seeded inputs.

Exit 0: float outputs within 1e-4 of max |ort|, 8-bit outputs within one quantization step.
Exit 1: a mismatch or a grove error. Exit 77 (ctest: skipped): no ONNX Runtime.
"""
import argparse
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent))
from real_model_test import ORT_NODE, grove_file_stem, run_grove, run_ort, skip  # noqa: E402

F = TensorProto.FLOAT
rng = np.random.default_rng(54)


def f32(*shape, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def u8(*shape):
    return rng.integers(0, 256, size=shape, dtype=np.uint8)


def i8(*shape):
    return rng.integers(-128, 128, size=shape, dtype=np.int8)


def model(nodes, inputs, outputs, initializers=()):
    """inputs: {name: array} (graph inputs); initializers: {name: array}; outputs: [(name, elem_type)]."""
    g = helper.make_graph(
        nodes, "contrib",
        [helper.make_tensor_value_info(n, onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[a.dtype], a.shape) for n, a in inputs.items()],
        [helper.make_tensor_value_info(n, t, None) for n, t in outputs],
        [numpy_helper.from_array(a, n) for n, a in dict(initializers).items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", 17), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 8
    return m


def ms(op, inputs, outputs, **attrs):
    return helper.make_node(op, inputs, outputs, domain="com.microsoft", **attrs)


def cases():
    """(name, model, feeds)."""
    x = f32(2, 5, 16)
    yield "Gelu", model([ms("Gelu", ["x"], ["y"])], {"x": x}, [("y", F)]), {"x": x}
    yield "BiasGelu", model([ms("BiasGelu", ["x", "b"], ["y"])], {"x": x}, [("y", F)], {"b": f32(16)}), {"x": x}
    for bias in (True, False):
        ins = ["x", "b"] if bias else ["x"]
        yield f"FastGelu{'Bias' if bias else ''}", model([ms("FastGelu", ins, ["y"])], {"x": x}, [("y", F)],
                                                           {"b": f32(16)} if bias else {}), {"x": x}
    yield "QuickGelu", model([ms("QuickGelu", ["x"], ["y"], alpha=1.5)], {"x": x}, [("y", F)]), {"x": x}
    a, b = f32(3, 4, 7), f32(3, 5, 7)
    yield "FusedMatMul", model([ms("FusedMatMul", ["a", "b"], ["y"], alpha=0.5, transB=1)], {"a": a, "b": b},
                               [("y", F)]), {"a": a, "b": b}
    at = f32(7, 4)
    yield "FusedMatMulTransA", model([ms("FusedMatMul", ["a", "w"], ["y"], transA=1)], {"a": at}, [("y", F)],
                                     {"w": f32(7, 6)}), {"a": at}
    h = f32(2, 6, 32)
    skip_in = f32(2, 6, 32)
    weights = {"gamma": f32(32, lo=0.5, hi=1.5), "beta": f32(32), "bias": f32(32)}
    yield "SkipLayerNormalization", model(
        [ms("SkipLayerNormalization", ["h", "s", "gamma", "beta", "bias"], ["y", "", "", "sum"], epsilon=1e-5)],
        {"h": h, "s": skip_in}, [("y", F), ("sum", F)], weights), {"h": h, "s": skip_in}
    yield "SkipLayerNormalizationNoBeta", model(
        [ms("SkipLayerNormalization", ["h", "s", "gamma"], ["y"])], {"h": h, "s": skip_in}, [("y", F)],
        {"gamma": weights["gamma"]}), {"h": h, "s": skip_in}
    yield "SkipSimplifiedLayerNormalization", model(
        [ms("SkipSimplifiedLayerNormalization", ["h", "s", "gamma", "bias"], ["y", "", "", "sum"], epsilon=1e-6)],
        {"h": h, "s": skip_in}, [("y", F), ("sum", F)], {"gamma": weights["gamma"], "bias": weights["bias"]}), \
        {"h": h, "s": skip_in}
    yield "SimplifiedLayerNormalization", model(
        [helper.make_node("SimplifiedLayerNormalization", ["h", "gamma"], ["y"], axis=-1, epsilon=1e-6)],
        {"h": h}, [("y", F)], {"gamma": weights["gamma"]}), {"h": h}
    img = f32(1, 3, 9, 9)
    for act, params in (("Relu", []), ("Sigmoid", []), ("LeakyRelu", [0.2]), ("Clip", [-0.5, 0.5]),
                        ("HardSigmoid", [0.3, 0.4]), ("Tanh", [])):
        extra = {"activation_params": params} if params else {}
        yield f"FusedConv{act}", model(
            [ms("FusedConv", ["x", "w", "b"], ["y"], activation=act, kernel_shape=[3, 3], pads=[1, 1, 1, 1], **extra)],
            {"x": img}, [("y", F)], {"w": f32(4, 3, 3, 3, lo=-0.5, hi=0.5), "b": f32(4)}), {"x": img}
    # FusedConv's fourth input Z (act(conv + Z)) is left out: ONNX Runtime 1.20.1 rewrites such a
    # node to its blocked layout and its result matches no reading of Z (act(conv + Z),
    # act(conv) + Z, without the bias); grove's reference follows the documented act(conv + Z).
    # Quantized matrix products, as ONNX Runtime's dynamic quantizer writes them.
    qa = u8(3, 5, 16)
    yield "MatMulIntegerToFloat", model(
        [ms("MatMulIntegerToFloat", ["a", "b", "sa", "sb", "za", "zb", "bias"], ["y"])], {"a": qa}, [("y", F)],
        {"b": i8(16, 8), "sa": np.array(0.02, np.float32), "sb": f32(8, lo=0.001, hi=0.01),
         "za": np.array(128, np.uint8), "zb": np.zeros(8, np.int8), "bias": f32(8)}), {"a": qa}
    fa = f32(4, 16)
    yield "DynamicQuantizeMatMul", model(
        [ms("DynamicQuantizeMatMul", ["a", "b", "sb", "zb", "bias"], ["y"])], {"a": fa}, [("y", F)],
        {"b": i8(16, 8), "sb": f32(8, lo=0.001, hi=0.01), "zb": np.zeros(8, np.int8), "bias": f32(8)}), {"a": fa}
    # QLinear elementwise ops and pools (uint8 and int8).
    for t, make in (("u8", u8), ("i8", i8)):
        dt = TensorProto.UINT8 if t == "u8" else TensorProto.INT8
        qa, qb = make(2, 3, 4, 5), make(3, 1, 5)
        zero = (np.array(128, np.uint8) if t == "u8" else np.array(3, np.int8))
        sc = lambda v: np.array(v, np.float32)  # noqa: E731
        for op in ("QLinearAdd", "QLinearMul"):
            yield f"{op}_{t}", model([ms(op, ["a", "sa", "za", "b", "sb", "zb", "sc", "zc"], ["y"])],
                                     {"a": qa, "b": qb}, [("y", dt)],
                                     {"sa": sc(0.05), "za": zero, "sb": sc(0.03), "zb": zero, "sc": sc(0.1), "zc": zero}), \
                {"a": qa, "b": qb}
        yield f"QLinearSigmoid_{t}", model([ms("QLinearSigmoid", ["a", "sa", "za", "sy", "zy"], ["y"])], {"a": qa},
                                           [("y", dt)], {"sa": sc(0.05), "za": zero, "sy": sc(1 / 256), "zy": zero}), \
            {"a": qa}
        yield f"QLinearLeakyRelu_{t}", model(
            [ms("QLinearLeakyRelu", ["a", "sa", "za", "sy", "zy"], ["y"], alpha=0.1)], {"a": qa}, [("y", dt)],
            {"sa": sc(0.05), "za": zero, "sy": sc(0.04), "zy": zero}), {"a": qa}
        img8 = make(1, 4, 7, 6)
        yield f"QLinearGlobalAveragePool_{t}", model(
            [ms("QLinearGlobalAveragePool", ["x", "sx", "zx", "sy", "zy"], ["y"])], {"x": img8}, [("y", dt)],
            {"sx": sc(0.05), "zx": zero, "sy": sc(0.02), "zy": zero}), {"x": img8}
        yield f"QLinearAveragePool_{t}", model(
            [ms("QLinearAveragePool", ["x", "sx", "zx", "sy", "zy"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                pads=[1, 1, 1, 1], count_include_pad=1)], {"x": img8}, [("y", dt)],
            {"sx": sc(0.05), "zx": zero, "sy": sc(0.04), "zy": zero}), {"x": img8}
        c1, c2 = make(1, 2, 4, 4), make(1, 3, 4, 4)
        yield f"QLinearConcat_{t}", model(
            [ms("QLinearConcat", ["sy", "zy", "x1", "s1", "z1", "x2", "s2", "z2"], ["y"], axis=1)],
            {"x1": c1, "x2": c2}, [("y", dt)],
            {"sy": sc(0.05), "zy": zero, "s1": sc(0.03), "z1": zero, "s2": sc(0.07), "z2": zero}), {"x1": c1, "x2": c2}


def compare(ref_file, got_file):
    ref = np.load(ref_file)
    if not got_file.exists():
        return False, f"no {got_file.name} from grove"
    got = np.load(got_file)
    if got.shape != ref.shape or got.dtype != ref.dtype:
        return False, f"{got.dtype}{list(got.shape)}, ONNX Runtime's {ref.dtype}{list(ref.shape)}"
    diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
    if np.issubdtype(ref.dtype, np.integer):  # one quantization step: rounding of a tie
        return float(diff.max()) <= 1, f"max |diff| {diff.max():.0f} step(s), {int((diff > 0).sum())} of {diff.size} differ"
    rel = float(diff.max()) / max(float(np.abs(ref).max()), 1e-12)
    return rel <= 1e-4, f"rel. error {rel:.2e}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--grove", required=True)
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    if not ORT_NODE.exists():
        skip(f"no ONNX Runtime at {ORT_NODE} (bench/peers/install.sh installs it)")
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for name, m, feeds in cases():
            if a.only not in name:
                continue
            work = tmp / name
            work.mkdir()
            path = work / "model.onnx"
            onnx.save(m, path)
            files = {}
            for k, v in feeds.items():
                files[k] = work / f"in_{k}.npy"
                np.save(files[k], v)
            try:
                run_ort(path, files, work / "ort")
            except RuntimeError as err:
                print(f"FAIL {name}: {err}")
                failures += 1
                continue
            for args in (["--threads", "2"], ["--executor", "reference"]):
                out = work / ("grove" + "".join(args).replace("-", "_"))
                try:
                    run_grove(a.grove, path, files, out, args)
                except RuntimeError as err:
                    print(f"FAIL {name} {' '.join(args)}: {err}")
                    failures += 1
                    continue
                for ref_file in sorted((work / "ort").glob("*.npy")):
                    ok, text = compare(ref_file, out / f"{grove_file_stem(ref_file.stem)}.npy")
                    failures += 0 if ok else 1
                    print(f"{'ok  ' if ok else 'FAIL'} {name} {' '.join(args)}: {ref_file.stem} {text}")
    print(f"contrib_ops_test: {failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""`grove quantize` end to end on a labelled dataset that ships with scikit-learn (digits,
8x8 images of 10 classes):

  1. a small CNN is trained in PyTorch (seeded, a few seconds) and exported to ONNX;
  2. `grove quantize --calibrate` writes the QDQ int8 model from 64 training images;
  3. grove runs the float and the int8 model on the held-out images (tile runtime at the
     given thread counts, and the reference executor for the int8 model).

Checks: the int8 model holds QuantizeLinear/DequantizeLinear and int8 weights; its accuracy
is within 1 point of the float model's; the tile runtime's int8 outputs equal the reference
executor's within one output quantization step; and, when onnxruntime-node is installed
(bench/peers/install.sh), ONNX Runtime runs the int8 model with an accuracy within 1 point
too. Prints both accuracies. Exits 1 on any failure.
Usage: static_quant_test.py --grove build/grove [--keep DIR]
"""
import argparse
import os
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx

ROOT = Path(__file__).resolve().parents[2]
ORT_NODE = Path(os.environ.get("GROVE_CACHE", Path.home() / ".cache" / "grove")) / "peers" / "node_modules" / "onnxruntime-node"


def train(torch, x, y):
    torch.manual_seed(0)
    nn = torch.nn
    model = nn.Sequential(
        nn.Conv2d(1, 16, 3, padding=1), nn.ReLU(),
        nn.Conv2d(16, 32, 3, stride=2, padding=1), nn.ReLU(),
        nn.Conv2d(32, 32, 3, padding=1), nn.ReLU(),
        nn.Flatten(),
        nn.Linear(32 * 4 * 4, 64), nn.ReLU(),
        nn.Linear(64, 10))
    opt = torch.optim.Adam(model.parameters(), lr=3e-3)
    xt, yt = torch.from_numpy(x), torch.from_numpy(y)
    for epoch in range(15):
        perm = torch.randperm(len(xt))
        for i in range(0, len(xt), 64):
            idx = perm[i:i + 64]
            opt.zero_grad()
            loss = nn.functional.cross_entropy(model(xt[idx]), yt[idx])
            loss.backward()
            opt.step()
    return model.eval()


def run(cmd):
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"{' '.join(map(str, cmd))} failed: {res.stderr.strip()[-800:]}")
    return res.stdout


def grove_logits(grove, model, images, work, tag, args):
    out = work / tag
    run([grove, "run", str(model), "--input", f"image={images}", "--output", str(out)] + args)
    return np.load(out / "logits.npy")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--grove", required=True)
    ap.add_argument("--threads", default="1,2")
    ap.add_argument("--keep", help="keep the models and samples in this directory")
    args = ap.parse_args()
    import torch
    from sklearn.datasets import load_digits

    digits = load_digits()
    x = (digits.images / 16.0).astype(np.float32)[:, None]
    y = digits.target.astype(np.int64)
    rng = np.random.default_rng(0)
    order = rng.permutation(len(x))
    train_idx, test_idx = order[:1200], order[1200:]
    model = train(torch, x[train_idx], y[train_idx])

    work = Path(args.keep or tempfile.mkdtemp(prefix="grove_static_quant_"))
    work.mkdir(parents=True, exist_ok=True)
    float_model, int8_model = work / "digits.onnx", work / "digits.int8.onnx"
    torch.onnx.export(model, torch.from_numpy(x[:1]), str(float_model), input_names=["image"],
                      output_names=["logits"], dynamic_axes={"image": {0: "batch"}, "logits": {0: "batch"}},
                      opset_version=13)
    calib = work / "calibration"
    calib.mkdir(exist_ok=True)
    for i in range(4):  # 4 samples of 16 training images each
        np.save(calib / f"sample{i}.npy", x[train_idx[i * 16:(i + 1) * 16]])
    images = work / "test_images.npy"
    np.save(images, x[test_idx])

    print(run([args.grove, "quantize", str(float_model), "--calibrate", str(calib), "-o", str(int8_model)]).strip())
    q = onnx.load(str(int8_model))
    ops = [n.op_type for n in q.graph.node]
    int8_weights = [t for t in q.graph.initializer if t.data_type == onnx.TensorProto.INT8 and len(t.dims) > 1]
    failures = []
    if ops.count("QuantizeLinear") < 4 or ops.count("DequantizeLinear") < 9 or len(int8_weights) != 5:
        failures.append(f"unexpected QDQ model: {ops.count('QuantizeLinear')} QuantizeLinear, "
                        f"{ops.count('DequantizeLinear')} DequantizeLinear, {len(int8_weights)} int8 weights")

    labels = y[test_idx]
    accuracy = lambda logits: float((logits.argmax(1) == labels).mean())  # noqa: E731
    reference = grove_logits(args.grove, int8_model, images, work, "int8_reference", ["--executor", "reference"])
    float_acc = None
    for t in args.threads.split(","):
        f = grove_logits(args.grove, float_model, images, work, f"float_t{t}", ["--threads", t])
        i8 = grove_logits(args.grove, int8_model, images, work, f"int8_t{t}", ["--threads", t])
        float_acc, int8_acc = accuracy(f), accuracy(i8)
        print(f"threads {t}: float accuracy {float_acc:.4f}, int8 accuracy {int8_acc:.4f} on {len(labels)} test images")
        if int8_acc < float_acc - 0.01:
            failures.append(f"threads {t}: int8 accuracy {int8_acc:.4f} is more than 1 point below float {float_acc:.4f}")
        # The logits are float (the last Gemm's output is not quantized): the fused integer path
        # and the reference's float ops on dequantized values may differ by rounding steps.
        err = float(np.abs(i8 - reference).max() / np.abs(reference).max())
        agree = float((i8.argmax(1) == reference.argmax(1)).mean())
        print(f"threads {t}: tile runtime vs reference executor on the int8 model: max error {err:.2e}, "
              f"top-1 agreement {agree:.4f}")
        if err > 0.02 or agree < 0.99:
            failures.append(f"threads {t}: int8 tile runtime differs from the reference executor: {err:.3g}, {agree:.4f}")

    if ORT_NODE.exists():
        out = work / "ort"
        out.mkdir(exist_ok=True)
        env = {**os.environ, "GROVE_ORT_NODE": str(ORT_NODE)}
        res = subprocess.run(["node", str(ROOT / "bench/runners/ort_runner.js"), "--model", str(int8_model),
                              "--input", f"image={images}", "--warmup", "0", "--runs", "1", "--outputs", str(out)],
                             capture_output=True, text=True, env=env)
        if res.returncode != 0:
            failures.append(f"ONNX Runtime cannot run the int8 model: {res.stderr.strip()[-500:]}")
        else:
            ort_acc = accuracy(np.load(out / "logits.npy"))
            print(f"ONNX Runtime on the int8 model: accuracy {ort_acc:.4f}")
            if ort_acc < float_acc - 0.01:
                failures.append(f"ONNX Runtime int8 accuracy {ort_acc:.4f} is more than 1 point below float")
    else:
        print(f"onnxruntime-node not installed ({ORT_NODE}): ONNX Runtime check skipped")

    for f in failures:
        print("FAIL:", f)
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""`grove tail --apply` and its retraining step (tools/tail/retrain.py) on the DCCNN kit's
plain Fashion-MNIST CNN (its --quick form, a quarter of the widths):

  1. `grove tail --apply --widths` grows three convs; the grown model's logits equal the
     original's (PyTorch, on the same 8 test images) and grove's equal PyTorch's within 1e-4;
  2. retrain.py --quick fine-tunes it (seconds) and writes the same graph with the new
     weights, whose grove logits equal PyTorch's again;
  3. a pruned model (--apply-mode prune) retrains the same way.

Usage: tail_retrain_test.py --grove build/grove [--trained DIR] (DIR: what train_dccnn.py
--quick wrote; without it the plain network is trained here with --quick --plain-only)
"""
import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import onnx

ROOT = Path(__file__).resolve().parents[2]
GROWN = {"/convs.0/Conv": 12, "/convs.2/Conv": 20, "/convs.4/Conv": 40}


def run(cmd):
    r = subprocess.run([str(c) for c in cmd], capture_output=True, text=True)
    if r.returncode != 0:
        raise SystemExit(f"FAILED: {' '.join(str(c) for c in cmd)}\n{r.stdout}{r.stderr}")
    return r.stdout


def shapes(path):
    return {t.name: list(t.dims) for t in onnx.load(str(path)).graph.initializer}


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--grove", required=True)
    ap.add_argument("--trained", type=Path)
    args = ap.parse_args()
    failures = []
    with tempfile.TemporaryDirectory(prefix="grove_tail_") as d:
        d = Path(d)
        trained = args.trained
        if not trained:
            trained = d / "trained"
            run([sys.executable, ROOT / "tools/dccnn/train_dccnn.py", "--quick", "--plain-only", "--out", trained])
        plain = trained / "plain.onnx"

        grown = d / "grown.onnx"
        widths = ",".join(f"{k}={v}" for k, v in GROWN.items())
        out = run([args.grove, "tail", plain, "--apply", grown, "--widths", widths, "--seed", "1"])
        print(out, end="")
        if f"{len(GROWN)} of {len(GROWN)} layers resized" not in out:
            failures.append("grove tail --apply did not resize every layer asked")
        weights = {n.name: n.input[1] for n in onnx.load(str(grown)).graph.node if n.op_type == "Conv"}
        for layer, width in GROWN.items():
            if shapes(grown)[weights[layer]][0] != width:
                failures.append(f"{layer}: {shapes(grown)[weights[layer]][0]} channels, not {width}")

        retrained = d / "retrained.onnx"
        print(run([sys.executable, ROOT / "tools/tail/retrain.py", "--model", grown, "--out", retrained, "--grove",
                   args.grove, "--original", plain, "--quick"]), end="")
        report = json.loads(Path(str(retrained) + ".json").read_text())
        if not report["applied_vs_original"] <= 1e-5:
            failures.append(f"the grown model's logits differ from the original's by {report['applied_vs_original']:.2e}")
        if report["accuracy_before"] != report["original_accuracy"]:
            failures.append("the grown model's accuracy before training is not the original's")
        for key in ("grove_vs_torch_before", "grove_vs_torch_after"):
            if not report[key] <= 1e-4:
                failures.append(f"{key}: {report[key]:.2e}")
        if shapes(retrained) != shapes(grown):
            failures.append("retraining changed the initializers' shapes")

        pruned = d / "pruned.onnx"
        print(run([args.grove, "tail", plain, "--apply", pruned, "--apply-mode", "prune", "--widths",
                   "/convs.5/Conv=48,/convs.1/Conv=12"]), end="")
        print(run([sys.executable, ROOT / "tools/tail/retrain.py", "--model", pruned, "--out", d / "pruned_rt.onnx",
                   "--grove", args.grove, "--quick"]), end="")

    for f in failures:
        print("FAIL:", f)
    print("tail retrain:", "FAILED" if failures else "ok")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

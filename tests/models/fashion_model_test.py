#!/usr/bin/python3
"""The Fashion-MNIST dynamic network (tools/dynamic/train_fashion.py, paper 002) in grove:

  1. train_fashion.py --quick trains the four sub-nets jointly (seconds) and saves PyTorch's
     logits of each for 8 test images;
  2. `grove run MODEL --subnet NAME` runs each sub-net on those 8 images at once (the batch is
     symbolic in the model); its logits must equal PyTorch's;
  3. `grove bench --subnet all --json` reports the four sub-nets, FLOPs growing with width.

Usage: fashion_model_test.py --grove build/grove [--grove-args "--threads 2"] [--trained DIR]
"""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kit_workdir import kit_workdir  # noqa: E402

NAMES = ["w25", "w50", "w75", "w100"]


def main():
    args, extra, work = kit_workdir("tools/dynamic/train_fashion.py", "grove_fashion_")
    failures = []
    model = work / "fashion.onnx"
    for name in NAMES:
        out = work / f"out_{name}"
        r = subprocess.run([args.grove, "run", str(model), "--subnet", name, "-i", str(work / "test_input.npy"),
                            "-o", str(out)] + extra, capture_output=True, text=True)
        if r.returncode != 0:
            failures.append(f"{name}: grove failed: {r.stderr.strip()}")
            continue
        got = np.load(out / "logits.npy")
        want = np.load(work / f"fashion.{name}.logits.npy")
        err = float(np.abs(got - want).max()) if got.shape == want.shape else float("inf")
        bound = 1e-3 * max(float(np.abs(want).max()), 1e-3)
        ok = got.shape == want.shape == (8, 10) and err <= bound
        print(f"{name:5s} {got.shape} max|grove - torch| = {err:.2e} (bound {bound:.2e}) {'ok' if ok else 'MISMATCH'}")
        if not ok:
            failures.append(f"{name}: shape {got.shape}, max error {err:.3g} over {bound:.3g}")
    r = subprocess.run([args.grove, "bench", str(model), "--subnet", "all", "--shape", "image=1x1x28x28", "--runs", "3",
                        "--json"] + extra, capture_output=True, text=True)
    try:
        rows = json.loads(r.stdout)["subnets"]
        flops = [row["flops"] for row in rows]
        if [row["name"] for row in rows] != NAMES or flops != sorted(flops) or flops[0] <= 0:
            failures.append(f"bench --subnet all: unexpected rows {rows}")
        else:
            print("bench --subnet all: " + ", ".join(f"{row['name']} {row['p50_ms']:.3f} ms" for row in rows))
    except (ValueError, KeyError) as err:
        failures.append(f"bench --subnet all: {err}: {r.stdout} {r.stderr}")
    for f in failures:
        print("FAIL:", f)
    print(f"{len(NAMES)} sub-nets compared, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

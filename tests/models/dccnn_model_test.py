#!/usr/bin/python3
"""The DCCNN kit (tools/dccnn/train_dccnn.py, thesis 004 3.2) in grove:

  1. train_dccnn.py --quick trains the plain network, decouples it into 2 class-specific
     paths, searches depths 3 and 4 (2 and 3 grouped convs), retrains (seconds) and saves PyTorch's logits of both
     networks for 8 test images;
  2. `grove run` runs both networks on those 8 images at once (the batch is symbolic); their
     logits must equal PyTorch's;
  3. the decoupled model's convs after its first decoupled conv are grouped convs of group 2
     (the paths), it has fewer FLOPs than the plain one, and grove's plan runs them as one
     chain of ordinary convs per path (passes/split_grouped_convs.cpp): path k of each grouped
     conv reads path k of the one before, no slice of their concatenation.

Usage: dccnn_model_test.py --grove build/grove [--grove-args "--threads 2"] [--trained DIR]
"""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np
import onnx

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kit_workdir import kit_workdir  # noqa: E402

PATHS = 2


def main():
    args, extra, work = kit_workdir("tools/dccnn/train_dccnn.py", "grove_dccnn_")
    failures = []
    for name in ("plain", "decoupled"):
        out = work / f"out_{name}"
        r = subprocess.run([args.grove, "run", str(work / f"{name}.onnx"), "-i", str(work / "test_input.npy"),
                            "-o", str(out)] + extra, capture_output=True, text=True)
        if r.returncode != 0:
            failures.append(f"{name}: grove failed: {r.stderr.strip()}")
            continue
        got = np.load(out / "logits.npy")
        want = np.load(work / f"{name}.logits.npy")
        err = float(np.abs(got - want).max()) if got.shape == want.shape else float("inf")
        bound = 1e-3 * max(float(np.abs(want).max()), 1e-3)
        ok = got.shape == want.shape == (8, 10) and err <= bound
        print(f"{name:9s} {got.shape} max|grove - torch| = {err:.2e} (bound {bound:.2e}) {'ok' if ok else 'MISMATCH'}")
        if not ok:
            failures.append(f"{name}: shape {got.shape}, max error {err:.3g} over {bound:.3g}")

    report = json.loads((work / "report.json").read_text())
    if not report["decoupled"]["flops"] < report["plain"]["flops"]:
        failures.append(f"decoupled FLOPs {report['decoupled']['flops']} not under plain {report['plain']['flops']}")
    graph = onnx.load(str(work / "decoupled.onnx")).graph
    grouped = [n.name for n in graph.node if n.op_type == "Conv"
               and any(a.name == "group" and a.i == PATHS for a in n.attribute)]
    if len(grouped) != report["decoupled"]["depth"] - 1:
        failures.append(f"grouped convs {grouped} for decoupling depth {report['decoupled']['depth']}")
    r = subprocess.run([args.grove, "plan", str(work / "decoupled.onnx"), "--shape", "image=8x1x28x28", "--threads",
                        str(PATHS), "--json"], capture_output=True, text=True)
    try:
        nodes = {n["name"] for n in json.loads(r.stdout)["nodes"]}
        for i, name in enumerate(grouped):
            for k in range(PATHS):
                if f"{name}/group{k}" not in nodes:
                    failures.append(f"{name}: no conv {name}/group{k} in the plan (not split into its paths)")
                if i > 0 and f"{name}/group{k}/x/Slice" in nodes:
                    failures.append(f"{name}: path {k} slices the conv before's output instead of reading its path")
        print(f"plan: {len(grouped)} grouped convs as {PATHS} chains of {len(grouped)} convs")
    except (ValueError, KeyError) as err:
        failures.append(f"grove plan: {err}: {r.stdout[:200]} {r.stderr}")
    for f in failures:
        print("FAIL:", f)
    print(f"2 networks compared, {len(grouped)} grouped convs, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

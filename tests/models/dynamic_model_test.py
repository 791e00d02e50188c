#!/usr/bin/python3
"""Dynamic models end to end (docs/dynamic.md):

  1. tools/dynamic/train_digits.py --quick trains a uniform and a non-uniform dynamic net on
     scikit-learn's digits (tiny widths, one epoch: seconds) and saves PyTorch's logits of
     every sub-net for one test image;
  2. `grove run MODEL --subnet NAME` runs each sub-net; its logits must equal PyTorch's
     within 1e-3 of their largest magnitude;
  3. metadata that cannot be right (a ratio above 1, more channels than a layer has, an
     unknown layer, a sub-net that would shrink the output) fails at load with one line
     naming the problem, exit code 1, no crash;
  4. `grove bench --subnet all --json` reports every sub-net, FLOPs growing with width, and
     `--subnet w25 --trace` writes that sub-net's tiles.

Usage: dynamic_model_test.py --grove build/grove [--grove-args "--threads 2"] [--keep DIR]
"""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kit_workdir import kit_workdir  # noqa: E402
import onnx



def subnets_of(model_path):
    meta = {p.key: p.value for p in onnx.load(str(model_path)).metadata_props}["grove.subnets"]
    return [line.split()[1] for line in meta.splitlines() if line.startswith("subnet ")]


def with_metadata(src, dst, text):
    m = onnx.load(str(src))
    for p in m.metadata_props:
        if p.key == "grove.subnets":
            p.value = text
    onnx.save(m, str(dst))


def main():
    args, extra, work = kit_workdir("tools/dynamic/train_digits.py", "grove_dynamic_")
    failures = []
    checked = 0
    for model in ("uniform", "nonuniform"):
        path = work / f"{model}.onnx"
        for name in subnets_of(path):
            out = work / f"out_{model}_{name}"
            r = subprocess.run([args.grove, "run", str(path), "--subnet", name, "-i", str(work / "test_input.npy"),
                                "-o", str(out)] + extra, capture_output=True, text=True)
            if r.returncode != 0:
                failures.append(f"{model} {name}: grove failed: {r.stderr.strip()}")
                continue
            got = np.load(out / "logits.npy")
            want = np.load(work / f"{model}.{name}.logits.npy")
            err = float(np.abs(got - want).max())
            bound = 1e-3 * max(float(np.abs(want).max()), 1e-3)
            status = "ok" if got.shape == want.shape and err <= bound else "MISMATCH"
            print(f"{model:10s} {name:6s} max|grove - torch| = {err:.2e} (bound {bound:.2e}) {status}")
            checked += 1
            if status != "ok":
                failures.append(f"{model} {name}: max error {err:.3g} over {bound:.3g}")

    bad_cases = {
        "exempt conv0 fc\nsubnet a ratio=2": "ratio 2.000000 is outside (0, 1]",
        "exempt conv0 fc\nsubnet a conv1=99999": "keeps 99999 channels but the layer has",
        "exempt conv0 fc\nsubnet a conv7=3": "names unknown layer 'conv7'",
        "exempt conv0\nsubnet a ratio=0.5": "output 'logits' would lose channels: mark layer 'fc' exempt",
    }
    for text, expected in bad_cases.items():
        bad = work / "bad.onnx"
        with_metadata(work / "uniform.onnx", bad, text)
        r = subprocess.run([args.grove, "run", str(bad), "--subnet", "a"] + extra, capture_output=True, text=True)
        lines = r.stderr.strip().splitlines()
        ok = r.returncode == 1 and len(lines) == 1 and expected in lines[0]
        print(f"bad metadata {text.splitlines()[-1]!r}: {'ok' if ok else 'WRONG'}: {r.stderr.strip()}")
        if not ok:
            failures.append(f"bad metadata {text!r}: exit {r.returncode}, stderr {r.stderr.strip()!r}")

    r = subprocess.run([args.grove, "bench", str(work / "uniform.onnx"), "--subnet", "all", "--runs", "3", "--json"] + extra,
                       capture_output=True, text=True)
    try:
        rows = json.loads(r.stdout)["subnets"]
        flops = [row["flops"] for row in rows]
        if [row["name"] for row in rows] != ["w25", "w50", "w75", "w100"] or flops != sorted(flops) or flops[0] <= 0:
            failures.append(f"bench --subnet all: unexpected rows {rows}")
        else:
            print("bench --subnet all: " + ", ".join(f"{row['name']} {row['p50_ms']:.3f} ms" for row in rows))
    except (ValueError, KeyError) as err:
        failures.append(f"bench --subnet all: {err}: {r.stdout} {r.stderr}")

    # --trace with one sub-net: the trace holds that sub-net's narrower convs' tiles.
    trace = work / "w25.trace.json"
    r = subprocess.run([args.grove, "bench", str(work / "uniform.onnx"), "--subnet", "w25", "--runs", "3", "--trace",
                        str(trace), "--json"] + extra, capture_output=True, text=True)
    try:
        events = json.loads(trace.read_text())
        events = events["traceEvents"] if isinstance(events, dict) else events
        tiles = [e for e in events if e.get("ph") == "X"]
        if r.returncode != 0 or not tiles:
            failures.append(f"bench --subnet w25 --trace: exit {r.returncode}, {len(tiles)} tile events: {r.stderr}")
        else:
            print(f"bench --subnet w25 --trace: {len(tiles)} tile events")
    except (OSError, ValueError) as err:
        failures.append(f"bench --subnet w25 --trace: {err}: {r.stderr}")

    # The plan options reach the sub-nets: a tuning record that is not there is an error naming
    # it (an option left behind would run the default plan), and a comparison of two plans is
    # refused by name.
    missing = work / "no.record"
    r = subprocess.run([args.grove, "bench", str(work / "uniform.onnx"), "--subnet", "w25", "--runs", "3", "--tuning",
                        str(missing)] + extra, capture_output=True, text=True)
    if r.returncode == 0 or str(missing) not in r.stderr or len(r.stderr.strip().splitlines()) != 1:
        failures.append(f"bench --subnet w25 --tuning MISSING: exit {r.returncode}, stderr {r.stderr.strip()!r}")
    else:
        print(f"bench --subnet w25 --tuning MISSING: {r.stderr.strip()}")
    r = subprocess.run([args.grove, "bench", str(work / "uniform.onnx"), "--subnet", "all", "--runs", "3", "--tuning",
                        "both"] + extra, capture_output=True, text=True)
    if r.returncode == 0 or "--tuning both" not in r.stderr or len(r.stderr.strip().splitlines()) != 1:
        failures.append(f"bench --subnet all --tuning both: exit {r.returncode}, stderr {r.stderr.strip()!r}")
    else:
        print(f"bench --subnet all --tuning both: refused: {r.stderr.strip()}")

    if checked < 6:
        failures.append(f"only {checked} sub-nets were compared")
    for f in failures:
        print("FAIL:", f)
    print(f"{checked} sub-nets compared, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

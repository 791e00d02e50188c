#!/usr/bin/python3
"""Dynamic feature-map pruning end to end (docs/dynamic.md, Antidote):

  1. tools/dynamic/train_antidote.py --quick trains a CNN on 2,000 Fashion-MNIST images with
     targeted dropout (seconds) and saves PyTorch's logits of 8 test images for every keep
     setting (channels only, channels and positions, per-map bounds);
  2. `grove run MODEL --prune SETTING` runs each; its logits must equal PyTorch's within 1e-3
     of their largest magnitude, and a pruned setting must change them (or the test could
     not fail);
  3. statements that cannot be right (a ratio above 1, an unknown value, a map that no conv
     reads) fail with one line naming the problem, exit code 1, no crash;
  4. `grove bench --prune both --json` times unpruned and pruned, with fewer FLOPs pruned;
  5. `grove plan` shows the plan the metadata prunes (its decision and pruned conv nodes), and
     `--prune off` the unpruned one;
  6. bench/antidote_blocks.py counts the Winograd blocks holding a kept position and the taps
     that read kept positions: keeping one position, exactly one block per map holds it, and
     only its centre tap of 9 reads a kept position.

Usage: antidote_model_test.py --grove build/grove [--grove-args "--threads 2"] [--keep DIR]
"""
import json
import subprocess
import sys
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
from kit_workdir import kit_workdir  # noqa: E402



def main():
    args, extra, work = kit_workdir("tools/dynamic/train_antidote.py", "grove_antidote_")
    settings = json.loads((work / "settings.json").read_text())
    failures, checked = [], 0
    unpruned = np.load(work / "antidote.none.logits.npy")
    for name, text in settings.items():
        out = work / f"out_{name}"
        r = subprocess.run([args.grove, "run", str(work / "antidote.onnx"), "--prune", text.replace("\n", ";") or "off",
                            "-i", str(work / "test_input.npy"), "-o", str(out)] + extra, capture_output=True, text=True)
        if r.returncode != 0:
            failures.append(f"{name}: grove failed: {r.stderr.strip()}")
            continue
        got = np.load(out / "logits.npy")
        want = np.load(work / f"antidote.{name}.logits.npy")
        err = float(np.abs(got - want).max())
        bound = 1e-3 * max(float(np.abs(want).max()), 1e-3)
        status = "ok" if got.shape == want.shape and err <= bound else "MISMATCH"
        if text and float(np.abs(want - unpruned).max()) <= bound:
            status = "UNCHANGED"  # the setting prunes nothing that matters: the check could not fail
        print(f"{name:7s} max|grove - torch| = {err:.2e} (bound {bound:.2e}) {status}")
        checked += 1
        if status != "ok":
            failures.append(f"{name}: {status}, max error {err:.3g} over {bound:.3g}")

    bad_cases = {
        "prune relu1.out channels=1.5": "channels=1.5 is not a ratio in (0, 1]",
        "prune relu9.out channels=0.5": "'relu9.out': no node computes this value",
        "prune relu4.out channels=0.5": "no 2-D Conv of one group reads it as x",
    }
    for text, expected in bad_cases.items():
        r = subprocess.run([args.grove, "run", str(work / "antidote.onnx"), "--prune", text, "--shape", "image=1x1x28x28"] + extra,
                           capture_output=True, text=True)
        lines = r.stderr.strip().splitlines()
        ok = r.returncode == 1 and len(lines) == 1 and expected in lines[0]
        print(f"bad statement {text!r}: {'ok' if ok else 'WRONG'}: {r.stderr.strip()}")
        if not ok:
            failures.append(f"bad statement {text!r}: exit {r.returncode}, stderr {r.stderr.strip()!r}")

    r = subprocess.run([args.grove, "bench", str(work / "antidote.onnx"), "--prune", "both", "--runs", "3", "--json",
                        "--shape", "image=8x1x28x28"] + extra, capture_output=True, text=True)
    try:
        rows = json.loads(r.stdout)["results"]
        if [row["pruning"] for row in rows] != ["unpruned", "pruned"] or not rows[1]["gflop"] < rows[0]["gflop"]:
            failures.append(f"bench --prune both: unexpected rows {rows}")
        else:
            print("bench --prune both: " + ", ".join(f"{row['pruning']} {row['p50_ms']:.3f} ms {row['gflop']:.4f} GFLOP" for row in rows))
    except (ValueError, KeyError) as err:
        failures.append(f"bench --prune both: {err}: {r.stdout} {r.stderr}")

    def plan_ops(prune):
        r = subprocess.run([args.grove, "plan", str(work / "antidote.onnx"), "--json", "--shape", "image=1x1x28x28"] +
                           (["--prune", prune] if prune else []) + extra, capture_output=True, text=True)
        if r.returncode != 0:
            failures.append(f"plan --prune {prune or '(metadata)'}: {r.stderr.strip()}")
            return []
        return [n["op"] for n in json.loads(r.stdout)["nodes"]]
    pruned_ops, dense_ops = plan_ops(""), plan_ops("off")
    # Only convs read the kit's pruned maps: their tiles rank the maps, with no AttentionKeep node.
    if not any("PrunedConv" in op for op in pruned_ops):
        failures.append(f"plan: the metadata's pruning is not in the plan: {pruned_ops}")
    elif any(op.startswith("AttentionKeep") or "PrunedConv" in op for op in dense_ops):
        failures.append(f"plan --prune off: pruned nodes in the plan: {dense_ops}")
    else:
        print("plan: pruned and --prune off plans as expected")

    # One position kept: one block of each map holds it, whatever the image (16 blocks of 4 and
    # 49 of 2 on the 14 x 14 map, 4 and 16 on the 7 x 7 one), and of its 9 taps only the centre
    # reads a kept position.
    r = subprocess.run(["/usr/bin/python3", "bench/antidote_blocks.py", "--model", str(work / "plain.onnx"),
                        "--positions", "0.001", "--images", "20", "--out", str(work / "blocks.json")],
                       capture_output=True, text=True)
    want = {"relu1.out": {"block4": 1 / 16, "block2": 1 / 49, "kept_taps": 1 / 9},
            "relu3.out": {"block4": 1 / 4, "block2": 1 / 16, "kept_taps": 1 / 9}}
    try:
        got = json.loads((work / "blocks.json").read_text())["maps"]
        before = len(failures)
        for m, blocks in want.items():
            for b, share in blocks.items():
                row = got[m][b]
                if not all(abs(row[k] - share) < 1e-6 for k in ("median", "p10", "p90")):
                    failures.append(f"antidote_blocks.py: {m} {b}: {row}, want {share}")
        if len(failures) == before:
            print("antidote_blocks.py: one kept position, one block per map, its centre tap alone")
    except (OSError, ValueError, KeyError) as err:
        failures.append(f"antidote_blocks.py: {err}: {r.stdout} {r.stderr}")

    if checked < len(settings):
        failures.append(f"only {checked} of {len(settings)} settings were compared")
    for f in failures:
        print("FAIL:", f)
    print(f"{checked} settings compared, {len(failures)} failures")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

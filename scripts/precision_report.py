#!/usr/bin/python3
"""Tables and the plot of docs/precision.md from `grove bench --precision both --json` runs.

Usage: precision_report.py DIR [--plot docs/img/precision_speedup.png]
DIR holds MODEL_tT_rR.json (one interleaved fp32/bf16 bench per model, thread count T and
round R) and MODEL_check.json (`--precision bf16 --check N --json`). Prints markdown: per
model and thread count the median over rounds of each precision's p50, the speedup, and the
check's error and agreement.
"""
import argparse
import collections
import glob
import json
import os
import re
import statistics
import sys


def load(directory):
    p50 = collections.defaultdict(lambda: collections.defaultdict(list))  # (model, threads) -> precision -> [p50]
    checks = {}
    for path in sorted(glob.glob(os.path.join(directory, "*.json"))):
        name = os.path.basename(path)[:-5]
        try:
            with open(path) as f:
                data = json.load(f)
        except json.JSONDecodeError:
            print(f"(skipped {path}: not a complete JSON object, a run still going or failed)", file=sys.stderr)
            continue
        if name.endswith("_check"):
            checks[name[:-6]] = data["check"]
            continue
        m = re.fullmatch(r"(.+)_t(\d+)_r\d+", name)
        if not m:
            continue
        for series in data["results"]:
            p50[(m.group(1), int(m.group(2)))][series["precision"]].append(series["p50_ms"])
    return p50, checks


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("directory")
    parser.add_argument("--plot", help="write a PNG of speedup against error here")
    args = parser.parse_args()
    p50, checks = load(args.directory)
    rows = []
    print("| model | threads | fp32 p50 ms | bf16 p50 ms | speedup | rounds |")
    print("|---|---:|---:|---:|---:|---:|")
    for (model, threads), by in sorted(p50.items()):
        fp32, bf16 = statistics.median(by["fp32"]), statistics.median(by["bf16"])
        rows.append((model, threads, fp32 / bf16))
        print(f"| {model} | {threads} | {fp32:.1f} | {bf16:.1f} | {fp32 / bf16:.2f}x | {len(by['fp32'])} |")
    print()
    print("| model | input sets | max error / max \\|fp32\\| | output | top-1 agreement | top-5 agreement | rows |")
    print("|---|---:|---:|---|---:|---:|---:|")
    for model, c in sorted(checks.items()):
        print(f"| {model} | {c['inputs']} | {c['max_error']:.4f} | {c['worst_output']} | "
              f"{100 * c['top1_agreement']:.2f}% | {100 * c['top5_agreement']:.2f}% | {c['rows']} |")
    if args.plot:
        import matplotlib
        matplotlib.use("Agg")
        import matplotlib.pyplot as plt
        fig, ax = plt.subplots(figsize=(6, 4))
        for model, threads, speedup in rows:
            error = checks.get(model, {}).get("max_error")
            if error is None:
                continue
            ax.scatter(error, speedup, marker="o" if threads == 2 else "s", s=60)
            ax.annotate(f"{model} {threads}T", (error, speedup), textcoords="offset points", xytext=(6, 4 if threads == 2 else -12), fontsize=8)
        ax.set_xlabel("max |bf16 - fp32| / max |fp32| of the outputs")
        ax.set_ylabel("speedup over fp32 (p50)")
        ax.set_title("--precision bf16: speed against accuracy")
        ax.grid(True, alpha=0.3)
        fig.tight_layout()
        fig.savefig(args.plot, dpi=110)


if __name__ == "__main__":
    main()

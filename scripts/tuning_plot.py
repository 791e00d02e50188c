#!/usr/bin/python3
"""Plots predicted against measured tile time from `grove tune --fit ... --fit-report R.csv`.

Usage: tuning_plot.py REPORT.csv OUT.png
One panel per model (NN2, linear regression), log-log, one colour per primitive.
"""
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402


def main():
    rows = list(csv.DictReader(open(sys.argv[1])))
    fig, axes = plt.subplots(1, 2, figsize=(9, 4.2), sharex=True, sharey=True)
    for ax, (key, title) in zip(axes, [("nn2_us", "NN2 (MLP 64x64)"), ("linear_us", "linear regression")]):
        for primitive, colour in [("gemm", "tab:blue"), ("winograd", "tab:orange")]:
            pts = [(float(r["measured_us"]), float(r[key])) for r in rows if r["primitive"] == primitive]
            if pts:
                ax.scatter([p[0] for p in pts], [p[1] for p in pts], s=12, c=colour, label=primitive, alpha=0.8)
        lo = min(min(float(r["measured_us"]), float(r["nn2_us"]), float(r["linear_us"])) for r in rows)
        hi = max(max(float(r["measured_us"]), float(r["nn2_us"]), float(r["linear_us"])) for r in rows)
        ax.plot([lo, hi], [lo, hi], color="gray", lw=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_title(title, fontsize=10)
        ax.set_xlabel("measured tile time per run (us)")
        ax.legend(fontsize=8)
    axes[0].set_ylabel("predicted (us)")
    fig.tight_layout()
    fig.savefig(sys.argv[2], dpi=110)
    print(f"plot: {sys.argv[2]}")


if __name__ == "__main__":
    main()

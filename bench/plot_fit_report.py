#!/usr/bin/env python3
"""Predicted against measured tile time from `grove tune --fit --fit-report` CSVs, one panel per
report: the plot in docs/tuning.md.

usage: plot_fit_report.py OUT.png TITLE=REPORT.csv [TITLE=REPORT.csv ...]"""
import collections
import csv
import sys

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt


def main(argv):
    if len(argv) < 3 or any("=" not in a for a in argv[2:]):
        sys.exit(__doc__)
    panels = [a.split("=", 1) for a in argv[2:]]
    fig, axes = plt.subplots(1, len(panels), figsize=(5.5 * len(panels), 5), squeeze=False)
    for ax, (title, path) in zip(axes[0], panels):
        by = collections.defaultdict(list)
        for r in csv.DictReader(open(path)):
            by[r["primitive"]].append((float(r["measured_us"]), float(r["nn2_us"])))
        for p, pts in sorted(by.items()):
            ax.scatter([a for a, _ in pts], [b for _, b in pts], s=6, alpha=0.6, label=f"{p} ({len(pts)})")
        values = [v for pts in by.values() for pt in pts for v in pt]
        ax.plot([min(values), max(values)], [min(values), max(values)], "k-", lw=0.8)
        ax.set_xscale("log")
        ax.set_yscale("log")
        ax.set_xlabel("measured tile time (us)")
        ax.set_ylabel("NN2 predicted (us)")
        ax.set_title(title)
        ax.legend(fontsize=7, markerscale=2)
    fig.tight_layout()
    fig.savefig(argv[1], dpi=90)


if __name__ == "__main__":
    main(sys.argv)

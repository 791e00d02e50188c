#!/usr/bin/python3
"""Which predicts a layer's latency over its width better: TA-DNN's wave model or the price
grove's tile counts use (docs/scaling.md, "grove tail")?

  /usr/bin/python3 bench/tail_wave.py --grove build/grove --out tail_wave.json MODEL.onnx [...] \
      [--threads 2] [--shape NAME=DIMS]
  /usr/bin/python3 bench/tail_wave.py --report tail_wave.json

`grove tail --json` times every Conv/MatMul/Gemm alone at widths around its own. Per layer,
three two-parameter models of its latency L(w) at width w are fitted by least squares on
those points, with B(w) = ceil(w / b) blocks of b output channels (the GEMM's register-tile
width along the output channels; b is fitted per model from 8, 16, 32 and 64) and S threads:

  waves   L = c + d * ceil(B(w) / S)   TA-DNN (thesis 004, 4.2): waves of one block's time
  work    L = c + d * B(w)             the tile-count price: work with padding lanes over S
  linear  L = c + d * w                FLOPs alone

and each is scored by its leave-one-out relative error (the median over the layer's widths
of |predicted - measured| / measured, each width predicted from a fit without it).
"""
import argparse
import json
import math
import statistics
import subprocess
import sys
from pathlib import Path

BLOCKS = (8, 16, 32, 64)


def fit(xs, ys):
    """Least squares of y = c + d x; d = 0 when every x is equal."""
    n = len(xs)
    mx, my = sum(xs) / n, sum(ys) / n
    sxx = sum((x - mx) ** 2 for x in xs)
    d = sum((x - mx) * (y - my) for x, y in zip(xs, ys)) / sxx if sxx > 0 else 0.0
    return my - d * mx, d


def features(kind, w, block, threads):
    blocks = math.ceil(w / block)
    return {"waves": math.ceil(blocks / threads), "work": blocks, "linear": w}[kind]


def loo_error(points, kind, block, threads):
    """Median leave-one-out relative error of the model on one layer's (width, ms) points."""
    errs = []
    for i, (w, ms) in enumerate(points):
        rest = points[:i] + points[i + 1:]
        c, d = fit([features(kind, x, block, threads) for x, _ in rest], [y for _, y in rest])
        errs.append(abs(c + d * features(kind, w, block, threads) - ms) / ms)
    return statistics.median(errs)


def analyse(tail):
    threads = tail["threads"]
    layers = [l for l in tail["layers"] if len(l["points"]) >= 4]
    out = {"model": Path(tail["model"]).name, "threads": threads, "layers": len(layers), "by_block": {}}
    for block in BLOCKS:
        rows = []
        for l in layers:
            pts = [(int(w), float(ms)) for w, ms in l["points"] if ms > 0]
            rows.append({"name": l["name"], "channels": l["channels"],
                         **{k: loo_error(pts, k, block, threads) for k in ("waves", "work", "linear")}})
        out["by_block"][block] = rows
    # Each model with the block width that serves it best on this model.
    out["block"] = {k: min(BLOCKS, key=lambda b: statistics.median(r[k] for r in out["by_block"][b]))
                    for k in ("waves", "work")}
    return out


def report(results):
    lines = ["| model | threads | layers | median error: waves (b) | work (b) | linear | best for: waves / work / linear / tie |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for r in results:
        rows = {k: r["by_block"][str(r["block"][k])] if str(r["block"][k]) in r["by_block"]
                else r["by_block"][r["block"][k]] for k in ("waves", "work")}
        err = [{"waves": a["waves"], "work": b["work"], "linear": a["linear"]} for a, b in zip(rows["waves"], rows["work"])]
        med = {k: statistics.median(x[k] for x in err) for k in ("waves", "work", "linear")}
        # A layer counts for the model that predicts it strictly best (within 0.1 point is a tie).
        def winner(x):
            ranked = sorted(x, key=x.get)
            return ranked[0] if x[ranked[1]] - x[ranked[0]] > 1e-3 else "tie"
        best = {k: sum(1 for x in err if winner(x) == k) for k in ("waves", "work", "linear", "tie")}
        lines.append(f"| {r['model']} | {r['threads']} | {r['layers']} | {100 * med['waves']:.1f}% ({r['block']['waves']}) | "
                     f"{100 * med['work']:.1f}% ({r['block']['work']}) | {100 * med['linear']:.1f}% | "
                     f"{best['waves']} / {best['work']} / {best['linear']} / {best['tie']} |")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("models", nargs="*")
    ap.add_argument("--grove", default="build/grove")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--shape", action="append", default=[])
    ap.add_argument("--out", default="tail_wave.json")
    ap.add_argument("--report", help="a JSON this script wrote: print its table")
    args = ap.parse_args()
    if args.report:
        results = json.loads(Path(args.report).read_text())
    else:
        results = []
        for model in args.models:
            cmd = [args.grove, "tail", model, "--threads", str(args.threads), "--json"]
            for s in args.shape:
                cmd += ["--shape", s]
            print("+", " ".join(cmd), file=sys.stderr, flush=True)
            tail = json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)
            results.append(analyse(tail))
        Path(args.out).write_text(json.dumps(results, indent=1) + "\n")
    print(report(results))


if __name__ == "__main__":
    main()

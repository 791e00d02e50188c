#!/usr/bin/python3
"""Numbers and plot of docs/dccnn.md: the decoupled network of tools/dccnn/train_dccnn.py
against the plain one, measured by grove side by side, and every searched candidate's
held-out accuracy against its latency.

  /usr/bin/python3 bench/dccnn_fashion.py --grove build/grove --models DIR --out dccnn.json [--rounds 7]
  /usr/bin/python3 bench/dccnn_fashion.py --plot dccnn.json [--img docs/img]

DIR holds what train_dccnn.py wrote. Latencies are medians over --rounds rounds; each round
runs `grove bench` on the plain and the decoupled network one after the other (alternating
which goes first), --runs runs each, at 1 and 2 threads and batch 1 and 8: interleaved, so
both see the same machine. Candidates are timed the same way at --paths threads, batch 1.
"""
import argparse
import json
import statistics
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from dynamic import grove_json  # noqa: E402


def p50(grove, model, threads, batch, runs):
    r = grove_json([grove, "bench", str(model), "--shape", f"image={batch}x1x28x28", "--threads", str(threads),
                    "--runs", str(runs), "--warmup", "20", "--json"])
    return r["results"][0]["p50_ms"]


def interleaved(grove, models, threads, batch, runs, rounds, raw=None):
    """{name: median p50 over rounds} with the models' order alternating round by round; each
    round's p50 goes into `raw` when given."""
    seen = {name: [] for name in models}
    names = list(models)
    for k in range(rounds):
        for name in names if k % 2 == 0 else names[::-1]:
            seen[name].append(p50(grove, models[name], threads, batch, runs))
    if raw is not None:
        raw.update(seen)
    return {name: statistics.median(v) for name, v in seen.items()}


def measure(args):
    d = Path(args.models)
    report = json.loads((d / "report.json").read_text())
    result = {"report": report, "latency": {}, "rounds": args.rounds, "runs": args.runs, "rounds_p50_ms": {}}
    pair = {"plain": d / "plain.onnx", "decoupled": d / "decoupled.onnx"}
    for threads in (1, 2):
        for batch in (1, 8):
            key = f"t{threads}_b{batch}"
            result["rounds_p50_ms"][key] = {}
            result["latency"][key] = interleaved(args.grove, pair, threads, batch, args.runs, args.rounds,
                                                 result["rounds_p50_ms"][key])
    cands = {f"d{r['depth']}_r{r['ratio']:g}": d / "candidates" / f"d{r['depth']}_r{r['ratio']:g}.onnx"
             for r in report["search"]}
    cands["plain"] = pair["plain"]
    result["candidates_ms"] = interleaved(args.grove, cands, report["paths"], 1, args.runs, max(3, args.rounds // 2))
    return result


def tables(r):
    rep = r["report"]
    out = ["| network | test accuracy | MFLOPs | " + " | ".join(
        f"{k.replace('_', ', ').replace('t', '', 1)} ms" for k in r["latency"]) + " |",
        "| --- | ---: | ---: | " + " | ".join("---:" for _ in r["latency"]) + " |"]
    for name in ("plain", "decoupled"):
        lat = " | ".join(f"{r['latency'][k][name]:.3f}" for k in r["latency"])
        out.append(f"| {name} | {100 * rep[name]['accuracy']:.2f}% | {rep[name]['flops'] / 1e6:.1f} | {lat} |")
    speed = " | ".join(f"{r['latency'][k]['plain'] / r['latency'][k]['decoupled']:.2f}x" for k in r["latency"])
    out.append(f"| plain / decoupled | | | {speed} |")
    out += ["", "| depth | filter ratio | FLOPs | held-out, pruned | held-out, retrained | ms |",
            "| ---: | ---: | ---: | ---: | ---: | ---: |"]
    plain_flops = rep["plain"]["flops"]
    for row in rep["search"]:
        ms = r["candidates_ms"].get(f"d{row['depth']}_r{row['ratio']:g}")
        out.append(f"| {row['depth']} | {row['ratio']:g} | {row['flops'] / plain_flops:.2f} | "
                   f"{100 * row['pruned_accuracy']:.2f}% | {100 * row['accuracy']:.2f}% | {ms:.3f} |")
    out.append(f"| plain | | 1.00 | | {100 * rep['plain']['held_out']:.2f}% | {r['candidates_ms']['plain']:.3f} |")
    return "\n".join(out)


def plot(r, img_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    img_dir.mkdir(parents=True, exist_ok=True)
    rep = r["report"]
    fig, ax = plt.subplots(figsize=(6, 4))
    ratios = sorted({row["ratio"] for row in rep["search"]}, reverse=True)
    for ratio, marker in zip(ratios, "osd^v"):
        rows = sorted((row for row in rep["search"] if row["ratio"] == ratio), key=lambda row: row["depth"])
        xs = [r["candidates_ms"][f"d{row['depth']}_r{ratio:g}"] for row in rows]
        ax.plot(xs, [100 * row["accuracy"] for row in rows], marker=marker, label=f"filter ratio {ratio:g}")
        for x, row in zip(xs, rows):
            ax.annotate(f"D{row['depth']}", (x, 100 * row["accuracy"]), fontsize=7, xytext=(3, 3),
                        textcoords="offset points")
    ax.plot([r["candidates_ms"]["plain"]], [100 * rep["plain"]["held_out"]], "k*", markersize=10, label="plain")
    ax.set_xlabel(f"grove latency, ms (median, batch 1, {rep['paths']} threads)")
    ax.set_ylabel("held-out accuracy after brief retraining, %")
    ax.set_title(f"DCCNN search on Fashion-MNIST: {rep['paths']} paths, depth D")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(img_dir / "dccnn_search.png", dpi=120)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--grove", default="build/grove")
    ap.add_argument("--models", help="the folder train_dccnn.py wrote")
    ap.add_argument("--out", default="dccnn.json")
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--plot", help="a JSON this script wrote: print its tables and draw the plot")
    ap.add_argument("--img", default=str(ROOT / "docs" / "img"))
    args = ap.parse_args()
    if args.plot:
        r = json.loads(Path(args.plot).read_text())
    else:
        if not args.models:
            ap.error("--models DIR is needed to measure (or --plot FILE)")
        r = measure(args)
        Path(args.out).write_text(json.dumps(r, indent=1) + "\n")
    print(tables(r))
    plot(r, Path(args.img))


if __name__ == "__main__":
    main()

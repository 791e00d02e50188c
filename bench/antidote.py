#!/usr/bin/python3
"""Numbers and plot of docs/dynamic.md's Antidote section: per keep setting, accuracy, the
FLOPs grove runs, and measured latency pruned vs unpruned (interleaved, same engine).

  /usr/bin/python3 bench/antidote.py --grove build/grove --models DIR --out antidote.json \
      [--batch 8] [--threads 2] [--runs 200] [--layer-rounds 15] [--rounds 1] [--layout nchw]
  /usr/bin/python3 bench/antidote.py --plot antidote.json
  /usr/bin/python3 bench/antidote.py --merge ROUND.json... --out antidote.json [--report report.json]

DIR holds what tools/dynamic/train_antidote.py wrote (NAME.onnx per setting, report.json). Each
setting's model is timed with `grove bench --prune both`, so every pair is measured side by
side; --layout nchw runs the dense convs on the same NCHW GEMM path as the pruned ones. "keep-all" prunes nothing
(ratio 1 everywhere): what the decisions and the gathers cost by themselves. The pruned
layers' own time (the convs that read a pruned map, whose tiles rank it where only convs read
it, with any decision and mask nodes) comes from traced runs, pruned and unpruned alternating.

A process's timings can sit a few percent apart from another's of the same plan (on this VM
c50's batch-1 drop moved from 2% to 9% between two processes), so --rounds repeats the whole
measurement (new processes) and keeps each number's median over the rounds; --merge does the
same for rounds measured apart, and --report takes the accuracies from another kit run's
report.json (a run that trained longer than the networks timed: timing does not depend on the
weights' values).
"""
import argparse
import json
import statistics
import subprocess
import sys
from pathlib import Path


def grove_json(cmd):
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def with_metadata(src, dst, text):
    import onnx
    m = onnx.load(str(src))
    del m.metadata_props[:]
    if text:
        p = m.metadata_props.add()
        p.key, p.value = "grove.antidote", text
    onnx.save(m, str(dst))


def tile_times(cmd, trace):
    """Per node of one traced warm run: (op label, summed tile microseconds)."""
    subprocess.run(cmd + ["--trace", str(trace)], check=True, capture_output=True, text=True)
    t = json.loads(Path(trace).read_text())
    events = t["traceEvents"] if isinstance(t, dict) else t
    out = {}
    for e in events:
        if e.get("ph") != "X" or e.get("cat") != "tile":
            continue
        label = e["name"].rsplit(" #", 1)[0]
        node = label.split(" (", 1)[0]
        op = label[len(node) + 2:-1] if " (" in label else ""
        prev = out.get(node, (op, 0.0))
        out[node] = (op, prev[1] + e["dur"])
    return out


def layer_times(base_cmd, path, rounds):
    """Summed tile time of the pruned layers (the convs that read a pruned map, whose tiles
    rank it, and any decision and mask nodes), pruned and unpruned, from `rounds` traced
    runs of each, alternating; medians. At 1 thread this is the layers' latency; at more, their CPU time with every run
    shared across the workers."""
    import tempfile
    dense, pruned, convs = [], [], []
    with tempfile.TemporaryDirectory() as tmp:
        for _ in range(rounds):
            off = tile_times(base_cmd + ["--prune", "off"], Path(tmp) / "off.json")
            on = tile_times(base_cmd, Path(tmp) / "on.json")
            conv_names = [n for n, (op, _) in on.items() if op.startswith("PrunedConv")]
            gates = [n for n in on if "@attention" in n or "@mask" in n]
            dense.append(sum(off[n][1] for n in conv_names))
            convs.append(sum(on[n][1] for n in conv_names))
            pruned.append(convs[-1] + sum(on[n][1] for n in gates))
    return {"unpruned_us": statistics.median(dense), "pruned_us": statistics.median(pruned),
            "pruned_convs_us": statistics.median(convs)}


def measure(args):
    models = Path(args.models)
    report = json.loads((models / "report.json").read_text())
    settings = {n: s["metadata"] for n, s in report["settings"].items() if s["metadata"]}
    settings["keep-all"] = "\n".join(f"prune relu{i}.out channels=1 positions=1" for i in range(len(report["bounds"])))
    result = {"report": report, "threads": args.threads, "batch": args.batch, "latency": {}}
    result["layout"] = args.layout
    for name, text in settings.items():
        path = models / f"bench_{name}.onnx"
        own = models / f"{name}.onnx"
        with_metadata(own if own.exists() else models / "antidote.onnx", path, text)
        layout = ["--layout", args.layout] if args.layout else []
        r = grove_json([args.grove, "bench", str(path), "--prune", "both", "--runs", str(args.runs), "--threads",
                        str(args.threads), "--shape", f"image={args.batch}x1x28x28", "--json"] + layout)
        rows = {row["pruning"]: row for row in r["results"]}
        result["latency"][name] = {k: {"p50_ms": v["p50_ms"], "p90_ms": v["p90_ms"], "gflop": v["gflop"]}
                                   for k, v in rows.items()}
        if args.layer_rounds:
            # Shared across the workers always: a plan's first runs try it alone on one core too
            # (--run-alone auto), and a traced run of one way against one of the other compares
            # one core's time with two cores' CPU time.
            base = [args.grove, "bench", str(path), "--runs", "20", "--threads", str(args.threads), "--shape",
                    f"image={args.batch}x1x28x28", "--run-alone", "off"] + layout
            result["latency"][name]["layers"] = layer_times(base, path, args.layer_rounds)
    return result


def merge(rounds):
    """One result whose every latency is the median over rounds of the same measurement."""
    if len(rounds) == 1:
        return rounds[0]
    out = json.loads(json.dumps(rounds[0]))
    out["rounds"] = len(rounds)

    def median_into(dst, srcs):
        for k, v in dst.items():
            if isinstance(v, dict):
                median_into(v, [s[k] for s in srcs])
            elif isinstance(v, (int, float)) and not isinstance(v, bool):
                dst[k] = statistics.median(s[k] for s in srcs)
    median_into(out["latency"], [r["latency"] for r in rounds])
    return out


def table(r):
    rep = r["report"]
    lines = [f"Plain network: {rep['plain_accuracy']:.4f} on {rep['test_images']} test images. "
             f"Batch {r['batch']}, {r['threads']} threads, layout {r.get('layout') or 'default'}, p50 of interleaved runs.", "",
             "| setting | accuracy, plain net pruned | accuracy after targeted dropout | FLOPs kept | "
             "latency unpruned ms | pruned ms | latency drop | pruned layers, unpruned us | pruned us (convs + decisions) | layers' drop |",
             "| --- | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: | ---: |"]
    for name, lat in r["latency"].items():
        s = rep["settings"].get(name, {})
        kept = lat["pruned"]["gflop"] / lat["unpruned"]["gflop"]
        drop = 1 - lat["pruned"]["p50_ms"] / lat["unpruned"]["p50_ms"]
        acc_plain = f"{s['accuracy_plain']:.4f}" if s else "-"
        acc_ttd = f"{s['accuracy_ttd']:.4f}" if s and s.get("accuracy_ttd") is not None else "-"
        layers = lat.get("layers")
        cells = (f"{layers['unpruned_us']:.1f} | {layers['pruned_us']:.1f} ({layers['pruned_convs_us']:.1f} + "
                 f"{layers['pruned_us'] - layers['pruned_convs_us']:.1f}) | "
                 f"{100 * (1 - layers['pruned_us'] / layers['unpruned_us']):.1f}%") if layers else "- | - | -"
        lines.append(f"| {name} | {acc_plain} | {acc_ttd} | {kept:.2f} | {lat['unpruned']['p50_ms']:.3f} | "
                     f"{lat['pruned']['p50_ms']:.3f} | {100 * drop:.1f}% | {cells} |")
    lines += ["", "Layer sensitivity (plain network, one map pruned alone, no retraining):", "",
              "| map | " + " | ".join(f"channels {k}" for k in rep["sensitivity"][0]["channels"]) + " | " +
              " | ".join(f"positions {k}" for k in rep["sensitivity"][0]["positions"]) + " |",
              "| --- |" + " ---: |" * (len(rep["sensitivity"][0]["channels"]) + len(rep["sensitivity"][0]["positions"]))]
    for row in rep["sensitivity"]:
        lines.append(f"| {row['map']} | " + " | ".join(f"{v:.3f}" for v in row["channels"].values()) + " | " +
                     " | ".join(f"{v:.3f}" for v in row["positions"].values()) + " |")
    return "\n".join(lines)


def plot(r, path):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    rep = r["report"]
    fig, ax = plt.subplots(figsize=(6.4, 4))
    base = next(iter(r["latency"].values()))["unpruned"]["p50_ms"]
    ax.scatter([base], [rep["plain_accuracy"]], color="black", label="unpruned")
    # Labels below their points, each pushed further down while it would overlap one already
    # placed near it (settings of nearly the same latency), with a line back to its point.
    points = []
    for name, lat in r["latency"].items():
        s = rep["settings"].get(name)
        if s and s.get("accuracy_ttd") is not None:
            points.append((lat["pruned"]["p50_ms"], s, name, lat))
    xs = [p[0] for p in points] + [base]
    span = max(xs) - min(xs) or 1.0
    placed = []  # (x, label y in points below the point's accuracy, accuracy)
    for x, s, name, lat in sorted(points, key=lambda p: (p[0], -p[1]["accuracy_ttd"])):
        ax.scatter([x], [s["accuracy_ttd"]], color="tab:blue")
        ax.scatter([x], [s["accuracy_plain"]], color="tab:orange", marker="x")
        dy = -12
        while any(abs(x - px) < 0.25 * span and abs((s["accuracy_ttd"] - pa) * 400 + dy - pdy) < 10 for px, pdy, pa in placed):
            dy -= 11
        placed.append((x, dy, s["accuracy_ttd"]))
        ax.annotate(f"{name} ({lat['pruned']['gflop'] / lat['unpruned']['gflop']:.2f} FLOPs)", (x, s["accuracy_ttd"]),
                    fontsize=8, xytext=(4, dy), textcoords="offset points",
                    arrowprops={"arrowstyle": "-", "color": "0.6", "lw": 0.5} if dy < -12 else None)
    ax.scatter([], [], color="tab:blue", label="after targeted dropout")
    ax.scatter([], [], color="tab:orange", marker="x", label="plain network, pruned")
    ax.set_xlabel(f"grove p50 latency, ms (batch {r['batch']}, {r['threads']} threads)")
    ax.set_ylabel("accuracy on Fashion-MNIST test images")
    ax.legend(fontsize=8)
    ax.grid(alpha=0.3)
    fig.tight_layout()
    fig.savefig(path, dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--grove")
    ap.add_argument("--models")
    ap.add_argument("--out")
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--layer-rounds", type=int, default=15,
                    help="traced runs per setting and pruning for the pruned layers' own time (0: skip)")
    ap.add_argument("--layout", help="nchw: dense convs on the NCHW GEMM path too (default: grove's choice)")
    ap.add_argument("--rounds", type=int, default=1, help="whole measurements in new processes; each number's median")
    ap.add_argument("--merge", nargs="+", help="round files to merge into --out (medians)")
    ap.add_argument("--report", help="with --merge: the kit report whose accuracies the result carries")
    ap.add_argument("--plot")
    args = ap.parse_args()
    if args.plot:
        r = json.loads(Path(args.plot).read_text())
        print(table(r))
        plot(r, Path(args.plot).with_suffix(".png"))
        return 0
    if args.merge:
        r = merge([json.loads(Path(f).read_text()) for f in args.merge])
        if args.report:
            r["report"] = json.loads(Path(args.report).read_text())
    else:
        r = merge([measure(args) for _ in range(args.rounds)])
    Path(args.out).write_text(json.dumps(r, indent=1))
    print(table(r))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Numbers and plots of docs/dynamic.md for the Fashion-MNIST dynamic network (paper 002):
each sub-net's test accuracy against its grove latency at batch 1 and 8 and 1 and 2 threads,
and the latency controller holding a target under a changing co-running load, with the
accuracy it delivered.

  /usr/bin/python3 bench/dynamic_fashion.py --grove build/grove --models DIR --out fashion.json \
      [--load MODEL.onnx] [--target-ms T] [--schedule 0:4s,1:4s,0:4s,2:4s,0:4s]
  /usr/bin/python3 bench/dynamic_fashion.py --plot fashion.json

DIR holds what tools/dynamic/train_fashion.py wrote (fashion.onnx, report.json). The
controller runs at --batch images per run; without --target-ms the target is 1.5 x the full
sub-net's P99 alone, measured first (the median of three processes). The load defaults to the
embedded default model.
"""
import argparse
import json
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
from dynamic import grove_json, with_batch  # noqa: E402  (the digits kit's helpers)


def measure(args):
    models = Path(args.models)
    model = str(models / "fashion.onnx")
    result = {"report": json.loads((models / "report.json").read_text()), "latency": {}, "batch": args.batch}
    for threads in (1, 2):
        for batch in (1, args.batch):
            result["latency"][f"t{threads}_b{batch}"] = grove_json(
                [args.grove, "bench", model, "--subnet", "all", "--shape", f"image={batch}x1x28x28", "--runs",
                 str(args.runs), "--threads", str(threads), "--json"])
    fixed = str(with_batch(models / "fashion.onnx", args.batch))
    target = args.target_ms
    if not target:
        # The median of three processes' P99: one stall of a VM's core moves a single P99 of
        # 1,000 sub-millisecond runs several-fold (7.7 and 10.4 ms targets against 1.6).
        p99 = sorted(grove_json([args.grove, "bench", fixed, "--subnet", "w100", "--runs", str(args.runs),
                                 "--threads", "2", "--json"])["subnets"][0]["p99_ms"] for _ in range(3))
        target = round(1.5 * p99[1], 3)
    load = args.load or str(ROOT / "models" / "default.onnx")
    for key, extra in (("controller", []), ("controller_urgent", ["--urgent"])):
        result[key] = grove_json([args.grove, "bench", fixed, "--latency-target-ms", str(target),
                                  "--co-run", load, "--co-run-schedule", args.schedule, "--threads", "2", "--json"]
                                 + extra)
        result[key]["schedule"] = args.schedule
        result[key]["load_model"] = Path(load).name
    return result


def delivered_accuracy(r, key):
    """The test accuracy of the sub-nets the controller ran, weighted by their runs."""
    acc = {n: s["accuracy"] for n, s in r["report"]["subnets"].items()}
    runs = {}
    for w in r[key]["controller"]:
        for n, k in w["subnets"].items():
            runs[n] = runs.get(n, 0) + k
    total = sum(runs.values())
    return sum(acc[n] * k for n, k in runs.items()) / total if total else 0.0


def tables(r):
    rep = r["report"]["subnets"]
    b = r["batch"]
    out = [f"| sub-net | channels per conv | MFLOP (batch 1) | test accuracy | p50 ms, batch 1, 1 / 2 threads | "
           f"p50 ms, batch {b}, 1 / 2 threads |", "| --- | --- | ---: | ---: | ---: | ---: |"]
    rows = {k: {s["name"]: s for s in v["subnets"]} for k, v in r["latency"].items()}
    for name, info in rep.items():
        cell = lambda k: f"{rows[k][name]['p50_ms']:.3f}"  # noqa: E731
        out.append(f"| {name} | {'/'.join(map(str, info['channels']))} | {rows['t1_b1'][name]['flops'] / 1e6:.2f} | "
                   f"{100 * info['accuracy']:.2f}% | {cell('t1_b1')} / {cell('t2_b1')} | "
                   f"{cell(f't1_b{b}')} / {cell(f't2_b{b}')} |")
    out.append("")
    full = rep["w100"]["accuracy"]
    for key, words in (("controller", "ordinary runs"), ("controller_urgent", "urgent runs")):
        c = r[key]
        out.append(f"Controller ({words}): target P99 <= {c['target_ms']} ms per 1-second window at batch {b}, "
                   f"load `{c['load_model']}` in phases {c['schedule']}: met in {c['met_controller']} of "
                   f"{c['windows']} windows ({100 * c['met_controller'] / max(1, c['windows']):.0f}%), the full sub-net "
                   f"every run {c['met_fixed']} of {len(c['fixed'])}; accuracy delivered "
                   f"{100 * delivered_accuracy(r, key):.2f}% (full sub-net {100 * full:.2f}%).")
    return "\n".join(out)


def plot(r, img_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    img_dir.mkdir(parents=True, exist_ok=True)
    rep = r["report"]["subnets"]
    fig, ax = plt.subplots(figsize=(6, 4))
    for key, marker in (("t1_b1", "o"), ("t2_b1", "s"), (f"t1_b{r['batch']}", "^"), (f"t2_b{r['batch']}", "v")):
        rows = r["latency"][key]["subnets"]
        threads, batch = key[1:].split("_b")
        ax.plot([row["p50_ms"] for row in rows], [100 * rep[row["name"]]["accuracy"] for row in rows], marker=marker,
                label=f"batch {batch}, {threads} thread{'s' if threads != '1' else ''}")
    for row in r["latency"][f"t2_b{r['batch']}"]["subnets"]:
        ax.annotate(row["name"], (row["p50_ms"], 100 * rep[row["name"]]["accuracy"]), fontsize=7, xytext=(3, -9),
                    textcoords="offset points")
    ax.set_xscale("log")
    ax.set_xlabel("grove latency, ms (median)")
    ax.set_ylabel("Fashion-MNIST test accuracy, %")
    ax.set_title("Sub-nets of one dynamic model (Fashion-MNIST)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(img_dir / "fashion_accuracy_latency.png", dpi=120)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--grove", default="build/grove")
    ap.add_argument("--models")
    ap.add_argument("--out")
    ap.add_argument("--plot")
    ap.add_argument("--load")
    ap.add_argument("--target-ms", type=float, default=0)
    ap.add_argument("--schedule", default="0:4s,1:4s,0:4s,2:4s,0:4s")
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--img", default=str(ROOT / "docs" / "img"))
    args = ap.parse_args()
    if args.plot:
        r = json.loads(Path(args.plot).read_text())
    else:
        r = measure(args)
        Path(args.out).write_text(json.dumps(r, indent=1) + "\n")
    print(tables(r))
    plot(r, Path(args.img))


if __name__ == "__main__":
    main()

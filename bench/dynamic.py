#!/usr/bin/python3
"""Numbers and plots of docs/dynamic.md: accuracy against measured grove latency per sub-net,
and the latency controller against a co-running load.

  /usr/bin/python3 bench/dynamic.py --grove build/grove --models DIR --out dynamic.json \
      [--load MODEL.onnx] [--target-ms T] [--schedule 0:4s,1:4s,0:4s,2:4s,0:4s]
  /usr/bin/python3 bench/dynamic.py --plot dynamic.json

DIR holds what tools/dynamic/train_digits.py wrote (uniform.onnx, nonuniform.onnx,
report.json). The models are timed at --batch images per run (a copy with that batch size
is written beside them). Without --target-ms the target is 1.5 x the full model's P99 alone,
measured first. The load defaults to the embedded default model (models/default.onnx).
"""
import argparse
import json
import subprocess
import sys
from pathlib import Path


def grove_json(cmd):
    print("+", " ".join(cmd), file=sys.stderr, flush=True)
    return json.loads(subprocess.run(cmd, check=True, capture_output=True, text=True).stdout)


def with_batch(path, batch):
    import onnx
    m = onnx.load(str(path))
    for v in (m.graph.input[0], m.graph.output[0]):
        v.type.tensor_type.shape.dim[0].dim_value = batch
    out = path.with_name(f"{path.stem}_b{batch}.onnx")
    onnx.save(m, str(out))
    return out


def measure(args):
    models = Path(args.models)
    report = json.loads((models / "report.json").read_text())
    result = {"report": report, "latency": {}, "threads": args.threads, "batch": args.batch}
    files = {kind: with_batch(models / f"{kind}.onnx", args.batch) for kind in ("uniform", "nonuniform")}
    for kind in ("uniform", "nonuniform"):
        result["latency"][kind] = grove_json([args.grove, "bench", str(files[kind]), "--subnet", "all",
                                              "--runs", str(args.runs), "--threads", str(args.threads), "--json"])
    full_p99 = None
    if not args.target_ms:
        alone = grove_json([args.grove, "bench", str(files["uniform"]), "--subnet", "w100", "--runs",
                            str(args.runs), "--threads", str(args.threads), "--json"])
        full_p99 = alone["subnets"][0]["p99_ms"]
    target = args.target_ms or round(1.5 * full_p99, 3)
    load = args.load or str(Path(__file__).resolve().parents[1] / "models" / "default.onnx")
    for key, extra in (("controller", []), ("controller_urgent", ["--urgent"])):
        result[key] = grove_json([args.grove, "bench", str(files["uniform"]), "--latency-target-ms", str(target),
                                  "--co-run", load, "--co-run-schedule", args.schedule, "--threads",
                                  str(args.threads), "--json"] + extra)
        result[key]["schedule"] = args.schedule
        result[key]["load_model"] = Path(load).name
    return result


def tables(r):
    out = []
    for kind in ("uniform", "nonuniform"):
        rep = r["report"][kind]["subnets"]
        out.append(f"| {kind} sub-net | channels per conv | MFLOP | accuracy, dynamic | accuracy, alone | "
                   f"first run ms | p50 ms | speedup |")
        out.append("| --- | --- | ---: | ---: | ---: | ---: | ---: | ---: |")
        rows = r["latency"][kind]["subnets"]
        full = rows[-1]["p50_ms"]
        for row in rows:
            info = rep[row["name"]]
            out.append(f"| {row['name']} | {'/'.join(map(str, info['channels']))} | {row['flops'] / 1e6:.1f} | "
                       f"{100 * info['dynamic']:.2f}% | {100 * info['alone']:.2f}% | {row['first_ms']:.3f} | "
                       f"{row['p50_ms']:.3f} | {full / row['p50_ms']:.2f}x |")
        out.append("")
    for key, words in (("controller", "ordinary jobs"), ("controller_urgent", "the timed model's runs urgent")):
        if key not in r:
            continue
        c = r[key]
        out.append(f"Controller ({words}): target P99 <= {c['target_ms']} ms per 1-second window, load "
                   f"`{c['load_model']}` in phases {c['schedule']}: P99 met in {c['met_controller']} of "
                   f"{c['windows']} windows with the controller, {c['met_fixed']} of {len(c['fixed'])} with the full "
                   f"model every time; without load the controller ran only the full model in "
                   f"{c['idle_windows_full']} of {c['idle_windows']} windows.")
    return "\n".join(out)


def plot(r, img_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    img_dir.mkdir(parents=True, exist_ok=True)
    fig, ax = plt.subplots(figsize=(6, 4))
    for kind, marker in (("uniform", "o"), ("nonuniform", "s")):
        rows = r["latency"][kind]["subnets"]
        rep = r["report"][kind]["subnets"]
        xs = [row["p50_ms"] for row in rows]
        ax.plot(xs, [100 * rep[row["name"]]["dynamic"] for row in rows], marker=marker, label=f"{kind}, dynamic")
        ax.plot(xs, [100 * rep[row["name"]]["alone"] for row in rows], marker=marker, linestyle=":",
                label=f"{kind}, each trained alone")
        for x, row in zip(xs, rows):
            ax.annotate(row["name"], (x, 100 * rep[row["name"]]["dynamic"]), fontsize=7, xytext=(3, -9),
                        textcoords="offset points")
    ax.set_xlabel(f"grove latency, ms (median, batch {r.get('batch', 1)}, {r['threads']} threads)")
    ax.set_ylabel("test accuracy, %")
    ax.set_title("Sub-nets of one dynamic model (digits)")
    ax.legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(img_dir / "dynamic_accuracy_latency.png", dpi=120)

    c = r["controller"]
    fig, (top, bottom) = plt.subplots(2, 1, figsize=(7, 5), sharex=True)
    lines = [(c["controller"], "-o", "controller"), (c["fixed"], "-s", "full model every run")]
    if "controller_urgent" in r:
        lines.append((r["controller_urgent"]["controller"], "-^", "controller, urgent runs"))
    for ws, style, label in lines:
        top.plot([w["second"] for w in ws], [w["p99_ms"] for w in ws], style, markersize=3, label=label)
    top.axhline(c["target_ms"], color="k", linestyle="--", linewidth=1, label="target")
    top.set_ylabel("P99 per second, ms")
    top.legend(fontsize=7)
    width = {s["name"]: s["width"] for s in c["subnets"]}
    for key, style, label in (("controller", "-o", "mean width run"), ("controller_urgent", "-^", "mean width run, urgent")):
        if key not in r:
            continue
        ws = r[key]["controller"]
        mean_width = [sum(width[n] * k for n, k in w["subnets"].items()) / max(1, sum(w["subnets"].values())) for w in ws]
        bottom.plot([w["second"] for w in ws], mean_width, style, markersize=3, label=label)
    ws = c["controller"]
    bottom.step([w["second"] for w in ws], [w["streams"] for w in ws], where="mid", color="gray",
                label="load streams")
    bottom.set_xlabel("second")
    bottom.set_ylabel("width / streams")
    bottom.legend(fontsize=7)
    fig.suptitle(f"Latency target {c['target_ms']} ms under a co-running load")
    fig.tight_layout()
    fig.savefig(img_dir / "dynamic_controller.png", dpi=120)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--grove", default="build/grove")
    ap.add_argument("--models")
    ap.add_argument("--out")
    ap.add_argument("--plot")
    ap.add_argument("--load")
    ap.add_argument("--target-ms", type=float, default=0)
    ap.add_argument("--schedule", default="0:4s,1:4s,0:4s,2:4s,0:4s")
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--runs", type=int, default=100)
    ap.add_argument("--batch", type=int, default=8)
    ap.add_argument("--img", default=str(Path(__file__).resolve().parents[1] / "docs" / "img"))
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

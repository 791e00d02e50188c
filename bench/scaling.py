#!/usr/bin/python3
"""Runs `grove simulate` over the benchmark models and writes the scaling page's numbers and
plots (docs/scaling.md, docs/img/scaling_*.png; Debian's python3-matplotlib).

  /usr/bin/python3 bench/scaling.py --grove build/grove --models DIR --out scaling.json \
      [--only resnet50_b1,bert_base_s128_b1] [--validate 15]
  /usr/bin/python3 bench/scaling.py --plot scaling.json          # tables and plots only

Each model is simulated twice at 1..64 cores: with this machine's measured memory bandwidth
shared by all cores (a lower bound on the speedup: every byte counted as if from memory)
and with unlimited bandwidth (an upper bound). --validate R measures 1..(this machine's
cores) threads for real, R interleaved runs per schedule, next to the prediction.
"""
import argparse
import json
import os
import shlex
import subprocess
import sys

CORES = [1, 2, 4, 8, 16, 32, 64]


def simulate(grove, model_path, name, extra, cores=CORES):
    cmd = [grove, "simulate", model_path, "--json", "--cores", ",".join(map(str, cores))] + extra
    # The exported input set (NAME.in.INPUT.npy), where there is one: random ids can be out of range.
    folder = os.path.dirname(model_path)
    for f in sorted(os.listdir(folder)):
        if f.startswith(name + ".in.") and f.endswith(".npy"):
            cmd += ["--input", f[len(name) + 4:-4] + "=" + os.path.join(folder, f)]
    print("+", shlex.join(cmd), file=sys.stderr, flush=True)
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)


def table(results):
    lines = []
    lines.append("| model | schedule | cores | measured ms | predicted ms | error |")
    lines.append("| --- | --- | ---: | ---: | ---: | ---: |")
    errors = []
    for name, r in results["models"].items():
        for row in r["limited"]["rows"]:
            if "measured_ms" not in row:
                continue
            err = (row["predicted_ms"] - row["measured_ms"]) / row["measured_ms"]
            errors.append(abs(err))
            lines.append(f"| {name} | {row['schedule']} | {row['cores']} | {row['measured_ms']:.2f} | "
                         f"{row['predicted_ms']:.2f} | {100 * err:+.1f}% |")
    errors.sort()
    if errors:
        lines.append("")
        lines.append(f"Median absolute error {100 * errors[len(errors) // 2]:.1f}%, worst {100 * errors[-1]:.1f}% "
                     f"({len(errors)} measurements).")
    return "\n".join(lines)


def gains(results):
    lines = ["| model | bandwidth | " + " | ".join(f"{c} cores" for c in CORES) + " |",
             "| --- | --- | " + " | ".join("---:" for _ in CORES) + " |"]
    for name, r in results["models"].items():
        if "unlimited" not in r:
            continue
        for key, label in (("limited", "measured here"), ("unlimited", "unlimited")):
            rows = r[key]["rows"]
            speed = {(x["schedule"], x["cores"]): x for x in rows}
            cells = []
            for c in CORES:
                a, b = speed.get(("aspen", c)), speed.get(("barrier", c))
                cells.append(f"{a['speedup']:.1f}x / {b['predicted_ms'] / a['predicted_ms']:.2f}" if a and b else "")
            lines.append(f"| {name} | {label} | " + " | ".join(cells) + " |")
    return "\n".join(lines)


def plot(results, img_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    fig, axes = plt.subplots(1, 2, figsize=(11, 4.2))
    for i, (name, r) in enumerate(results["models"].items()):
        if "unlimited" not in r:
            continue
        color = f"C{i}"
        for key, style in (("limited", "-"), ("unlimited", ":")):
            rows = [x for x in r[key]["rows"] if x["schedule"] == "aspen"]
            label = name if key == "limited" else None
            axes[0].plot([x["cores"] for x in rows], [x["speedup"] for x in rows], style, color=color, marker="o", ms=3,
                         label=label)
            bar = {x["cores"]: x for x in r[key]["rows"] if x["schedule"] == "barrier"}
            axes[1].plot([x["cores"] for x in rows], [bar[x["cores"]]["predicted_ms"] / x["predicted_ms"] for x in rows],
                         style, color=color, marker="o", ms=3, label=label)
    for ax in axes:
        ax.set_xscale("log", base=2)
        ax.set_xticks(CORES)
        ax.set_xticklabels([str(c) for c in CORES])
        ax.set_xlabel("simulated cores")
        ax.grid(alpha=0.3)
    axes[0].plot(CORES, CORES, color="grey", lw=0.8, label="linear")
    axes[0].set_yscale("log", base=2)
    axes[0].set_ylabel("predicted speedup over 1 core (aspen)")
    axes[1].axhline(1.0, color="grey", lw=0.8)
    axes[1].set_ylabel("predicted barrier / aspen latency")
    axes[0].legend(fontsize=7)
    fig.suptitle("grove simulate: solid = this machine's bandwidth shared, dotted = unlimited bandwidth", fontsize=9)
    fig.tight_layout()
    os.makedirs(img_dir, exist_ok=True)
    fig.savefig(os.path.join(img_dir, "scaling_simulated.png"), dpi=110)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--grove", default="build/grove")
    ap.add_argument("--models", default=os.path.expanduser("~/.cache/grove/bench"))
    ap.add_argument("--only", default="convstack,mobilenet_v2_b1,resnet50_b1,vgg16_b1,bert_base_s128_b1,gpt2_s256_b1")
    ap.add_argument("--validate", type=int, default=15)
    ap.add_argument("--out", default="scaling.json")
    ap.add_argument("--validate-only", action="store_true",
                    help="only 1 and 2 cores with --validate (big models: the error table, no scaling curves)")
    ap.add_argument("--plot", help="an earlier --out file: print the tables and draw the plot only")
    ap.add_argument("--img", default="docs/img")
    a = ap.parse_args()
    if a.plot:
        results = json.load(open(a.plot))
    else:
        results = json.load(open(a.out)) if os.path.exists(a.out) else {"models": {}}
        for name in a.only.split(","):
            path = os.path.join(a.models, name + ".onnx")
            if not os.path.exists(path):
                print(f"skip {name}: {path} not found (bench/models/export_bench_models.py)", file=sys.stderr)
                continue
            if a.validate_only:
                limited = simulate(a.grove, path, name, ["--validate", str(a.validate)], cores=[1, 2])
                results["models"][name] = {"limited": limited}
            else:
                limited = simulate(a.grove, path, name, ["--validate", str(a.validate)] if a.validate else [])
                unlimited = simulate(a.grove, path, name, ["--bandwidth", "0"])
                results["models"][name] = {"limited": limited, "unlimited": unlimited}
            results["machine"] = limited["machine"]
            with open(a.out, "w") as f:  # after each model: a later failure keeps the earlier ones
                json.dump(results, f, indent=1)
    print(table(results))
    print()
    print(gains(results))
    plot(results, a.img)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Numbers of docs/scaling.md's `grove tail --apply` table: the DCCNN kit's plain Fashion-MNIST
CNN against itself with `grove tail`'s suggestions applied and retrained, accuracy and latency
side by side.

  /usr/bin/python3 bench/tail_fashion.py --grove build/grove --models DIR --out tail.json
      [--modes grow,prune] [--tail-threads 2] [--rounds 7] [--runs 200]
      [--retrain-args "--epochs 1"] [--measure-only]

DIR holds plain.onnx of tools/dccnn/train_dccnn.py (trained there with --plain-only when
missing). For each mode, `grove tail plain.onnx --threads T --apply DIR/tail_MODE.onnx
--apply-mode MODE --json` (batch 1) picks and applies the widths, and tools/tail/retrain.py
fine-tunes the result; the plain network is fine-tuned the same way as a control (what the
extra training alone gives). Training runs under `nice -n 19`; the timing does not. Latencies
are medians over --rounds rounds of `grove bench` p50, the models alternating within each
round (bench/dccnn_fashion.py), at 1 and 2 threads, batch 1 and 8.
"""
import argparse
import json
import shlex
import subprocess
import sys
from pathlib import Path

import onnx

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "bench"))
sys.path.insert(0, str(ROOT / "tools" / "dccnn"))
from dccnn_fashion import interleaved  # noqa: E402
import pathnet  # noqa: E402

NICE = ["nice", "-n", "19"]


def conv_widths(path):
    m = onnx.load(str(path))
    dims = {t.name: list(t.dims) for t in m.graph.initializer}
    return [dims[n.input[1]][0] for n in m.graph.node if n.op_type == "Conv"]


def mflops(widths):
    return sum(pathnet.conv_flops(pathnet.PathNet(widths, [s for _, s in pathnet.LAYERS]))) / 1e6


def retrain(model, out, original, args):
    subprocess.run(NICE + [sys.executable, str(ROOT / "tools/tail/retrain.py"), "--model", str(model), "--out", str(out),
                           "--grove", args.grove] + (["--original", str(original)] if original else []) +
                   shlex.split(args.retrain_args), check=True)
    return json.loads(Path(str(out) + ".json").read_text())


def prepare(args, d):
    plain = d / "plain.onnx"
    if not plain.exists():
        subprocess.run(NICE + [sys.executable, str(ROOT / "tools/dccnn/train_dccnn.py"), "--plain-only", "--out", str(d)],
                       check=True)
    result = {"plain": {"widths": conv_widths(plain),
                        "accuracy": json.loads((d / "report.json").read_text())["plain"]["accuracy"]}}
    result["plain_retrained"] = retrain(plain, d / "plain_rt.onnx", None, args)
    for mode in args.modes.split(","):
        applied = d / f"tail_{mode}.onnx"
        r = subprocess.run([args.grove, "tail", str(plain), "--shape", "image=1x1x28x28", "--threads",
                            str(args.tail_threads), "--apply", str(applied), "--apply-mode", mode, "--json"],
                           check=True, capture_output=True, text=True)
        tail = json.loads(r.stdout)
        report = retrain(applied, d / f"tail_{mode}_rt.onnx", plain, args)
        result[mode] = {"tail": tail, "widths": conv_widths(applied), "retrain": report}
    return result


def table(r):
    keys = list(r["latency"])
    out = ["| model | conv widths | MFLOPs | test accuracy | " + " | ".join(
        f"{k.replace('_', ', ').replace('t', '', 1)} ms" for k in keys) + " |",
        "| --- | --- | ---: | ---: | " + " | ".join("---:" for _ in keys) + " |"]

    def row(name, label, widths, acc):
        lat = " | ".join(f"{r['latency'][k][name]:.3f}" for k in keys)
        out.append(f"| {label} | {', '.join(map(str, widths))} | {mflops(widths):.1f} | {100 * acc:.2f}% | {lat} |")

    row("plain", "original", r["plain"]["widths"], r["plain"]["accuracy"])
    out.append(f"| original, fine-tuned alike | | | {100 * r['plain_retrained']['accuracy_after']:.2f}% | |")
    for mode in r["modes"]:
        row(mode, f"--apply-mode {mode}, retrained", r[mode]["widths"], r[mode]["retrain"]["accuracy_after"])
    return "\n".join(out)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--grove", required=True)
    ap.add_argument("--models", type=Path, required=True)
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--modes", default="grow,prune")
    ap.add_argument("--tail-threads", type=int, default=2)
    ap.add_argument("--rounds", type=int, default=7)
    ap.add_argument("--runs", type=int, default=200)
    ap.add_argument("--retrain-args", default="", help="passed to tools/tail/retrain.py")
    ap.add_argument("--measure-only", action="store_true", help="reuse the models and reports of --out; time again")
    args = ap.parse_args()
    d = args.models
    d.mkdir(parents=True, exist_ok=True)
    r = json.loads(args.out.read_text()) if args.measure_only else prepare(args, d)
    r["modes"] = args.modes.split(",")
    models = {"plain": d / "plain.onnx"}
    models.update({mode: d / f"tail_{mode}_rt.onnx" for mode in r["modes"]})
    r["latency"], r["rounds_p50_ms"], r["rounds"], r["runs"] = {}, {}, args.rounds, args.runs
    for threads in (1, 2):
        for batch in (1, 8):
            key = f"t{threads}_b{batch}"
            r["rounds_p50_ms"][key] = {}
            r["latency"][key] = interleaved(args.grove, models, threads, batch, args.runs, args.rounds,
                                            r["rounds_p50_ms"][key])
    args.out.write_text(json.dumps(r, indent=1) + "\n")
    print(table(r))


if __name__ == "__main__":
    main()

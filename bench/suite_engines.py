"""How the benchmark suite runs each engine: one command line per engine, for the agreement
run (writes outputs as .npy) and for a timing round (prints the timed runs' latencies)."""
import json
import os
import re
import subprocess
from dataclasses import dataclass

HERE = os.path.dirname(os.path.abspath(__file__))
# grove-aspen and grove-barrier plan by the hand rules (--tuning off); grove-tuned is aspen with
# the record `grove tune` writes for each model and thread count before its rounds (docs/tuning.md).
ENGINES = ["grove-aspen", "grove-tuned", "grove-barrier", "ort", "torchscript"]
ROUND_TIMEOUT_S = 1800  # a hung engine fails its round instead of stalling the suite


class EngineError(Exception):
    pass


@dataclass
class Context:
    grove: str
    cache: str
    peers_dir: str
    warmup: int
    warmup_seconds: float
    runs: int


def default_peers_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache")
    return os.environ.get("GROVE_PEERS_DIR") or os.path.join(base, "grove", "peers")


def input_args(ctx: Context, manifest, flag: str):
    args = []
    for i in manifest["inputs"]:  # graph-input order: the TorchScript runner passes positionally
        args += [flag, f"{i['name']}={os.path.join(ctx.cache, i['file'])}"]
    return args


def command(engine: str, ctx: Context, manifest, threads: int, warmup: int, runs: int,
            out_dir=None):
    model = os.path.join(ctx.cache, manifest["onnx"])
    if engine.startswith("grove-"):
        schedule = "aspen" if engine == "grove-tuned" else engine.split("-", 1)[1]
        tuning = ["--tuning", "record" if engine == "grove-tuned" else "off"]
        if out_dir:  # `grove run` saves outputs; `grove bench` times
            return [ctx.grove, "run", model, "--threads", str(threads), "--schedule", schedule,
                    "--output", out_dir] + tuning + input_args(ctx, manifest, "--input")
        return [ctx.grove, "bench", model, "--threads", str(threads), "--schedule", schedule,
                "--warmup", str(warmup), "--warmup-seconds", str(ctx.warmup_seconds), "--runs", str(runs),
                "--json"] + tuning + \
            input_args(ctx, manifest, "--input")
    if engine == "ort":
        cmd = ["node", os.path.join(HERE, "runners", "ort_runner.js"), "--model", model]
    elif engine == "torchscript":
        cmd = ["/usr/bin/python3", os.path.join(HERE, "runners", "torchscript_runner.py"),
               "--model", os.path.splitext(model)[0] + ".pt"]
    else:
        raise EngineError(f"unknown engine {engine}")
    cmd += input_args(ctx, manifest, "--input")
    cmd += ["--threads", str(threads), "--warmup", str(warmup), "--runs", str(runs)]
    if runs > 0:
        cmd += ["--warmup-seconds", str(ctx.warmup_seconds)]
    return cmd + (["--outputs", out_dir] if out_dir else [])


def execute(cmd, ctx: Context) -> str:
    # The suite's own tuning records, apart from the user's cache.
    env = dict(os.environ,
               GROVE_ORT_NODE=os.path.join(ctx.peers_dir, "node_modules", "onnxruntime-node"),
               GROVE_TUNE_DIR=os.path.join(ctx.cache, "tune"))
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                           env=env, timeout=ROUND_TIMEOUT_S, stdin=subprocess.DEVNULL)
    except subprocess.TimeoutExpired:
        raise EngineError(f"timed out after {ROUND_TIMEOUT_S} s: {' '.join(cmd[:3])}")
    if r.returncode != 0:
        tail = (r.stderr or r.stdout).strip().splitlines()[-3:]
        raise EngineError(f"exit {r.returncode}: {' | '.join(tail)}")
    return r.stdout


def run_once(engine: str, ctx: Context, manifest, out_dir: str) -> None:
    execute(command(engine, ctx, manifest, os.cpu_count(), 0, 0, out_dir), ctx)


def tune(ctx: Context, manifest, threads: int) -> str:
    """grove tune for this model and thread count (the record grove-tuned then uses); returns
    its summary line."""
    model = os.path.join(ctx.cache, manifest["onnx"])
    out = execute([ctx.grove, "tune", model, "--threads", str(threads), "-q"] +
                  input_args(ctx, manifest, "--input"), ctx)
    lines = [l for l in out.splitlines() if l.startswith("whole model")]
    return lines[-1] if lines else out.strip().splitlines()[-1]


def run_round(engine: str, ctx: Context, manifest, threads: int):
    """One fresh process: warmup + timed runs; returns the timed runs' latencies in ms."""
    out = execute(command(engine, ctx, manifest, threads, ctx.warmup, ctx.runs), ctx)
    line = out.strip().splitlines()[-1]
    data = json.loads(line)
    if engine.startswith("grove-"):
        return data["results"][0]["ms"]
    return data["ms"]


def grove_gflop(ctx: Context, manifest) -> float:
    """The model's GFLOPs as grove counts them (grove info: 2 x multiply-adds for conv/matmul)."""
    out = execute([ctx.grove, "info", os.path.join(ctx.cache, manifest["onnx"])], ctx)
    m = re.search(r"compute: ([0-9.]+) GFLOPs", out)
    return float(m.group(1)) if m else 0.0

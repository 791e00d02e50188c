#!/usr/bin/python3
"""The decode benchmark of docs/generation.md: `grove generate` against ONNX Runtime 1.20.1
running the same decoder in its own greedy loop (bench/runners/ort_generate.js), side by side.

  /usr/bin/python3 bench/generate.py --grove build/grove --out generate.json [--rounds 5]
  /usr/bin/python3 bench/generate.py --grove build/grove --long 1000 --out long.json
  /usr/bin/python3 bench/generate.py --plot long.json [--img docs/img]

Each round, at each thread count: the machine's read bandwidth (bench/read_bandwidth.cpp,
compiled here), then grove fp32 (ASPEN), grove fp32 (barrier), grove bf16, grove int8w (weight-only
int8) and ONNX Runtime,
each generating --new-tokens after a --prompt-length prompt, the order rotating round by
round. A configuration's per-token latency is the median of its rounds' median step (steps
that planned a new cache capacity left out); tokens/s is its inverse. The roofline is the
bytes a step must read (every weight a MatMul or Gemm reads, in the precision it runs, plus
the cache's keys and values) over the round's measured read bandwidth. --long runs one long
generation per engine at the largest thread count for the plot of tokens/s against position.
The model is bench/models/export_decoder_models.py's gpt2_kv unless --model says otherwise.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
CACHE = Path(os.environ.get("XDG_CACHE_HOME") or Path.home() / ".cache") / "grove"
ORT_MODULES = CACHE / "peers" / "node_modules"


def run_json(cmd, env=None):
    r = subprocess.run(cmd, capture_output=True, text=True, env=env)
    if r.returncode != 0:
        sys.exit(f"{' '.join(map(str, cmd[:3]))} failed: {r.stderr.strip()[-2000:]}")
    return json.loads(r.stdout.strip().splitlines()[-1])


def weight_bytes(model):
    """Bytes of the initializers MatMul and Gemm read (a gather-only table, e.g. the position
    embedding, reads one row per token and is left out)."""
    import onnx
    m = onnx.load(str(model))
    sizes = {t.name: int(t.raw_data and len(t.raw_data) or 4 * len(t.float_data)) for t in m.graph.initializer}
    read = {i for n in m.graph.node if n.op_type in ("MatMul", "Gemm") for i in n.input}
    return sum(b for name, b in sizes.items() if name in read)


def bandwidth_probe(tmp):
    exe = Path(tmp) / "read_bandwidth"
    subprocess.run(["g++", "-O2", "-march=native", "-pthread", str(ROOT / "bench/read_bandwidth.cpp"), "-o", str(exe)],
                   check=True)
    return exe


def engines(args, threads):
    prompt = ",".join(str(17 + 31 * i) for i in range(args.prompt_length))
    common = ["generate", str(args.model), "--prompt-ids", prompt, "-n", str(args.new_tokens), "--json",
              "--threads", str(threads), "--warmup", "1"]
    env = dict(os.environ, NODE_PATH=str(ORT_MODULES))
    return {
        "grove_fp32": lambda: run_json([args.grove] + common),
        "grove_fp32_barrier": lambda: run_json([args.grove] + common + ["--schedule", "barrier"]),
        "grove_bf16": lambda: run_json([args.grove] + common + ["--precision", "bf16"]),
        "grove_int8w": lambda: run_json([args.grove] + common + ["--precision", "int8w"]),
        "ort_fp32": lambda: run_json(["node", str(ROOT / "bench/runners/ort_generate.js"), "--model", str(args.model),
                                      "--prompt-ids", prompt, "--new-tokens", str(args.new_tokens),
                                      "--threads", str(threads), "--warmup", "1"], env),
    }


def steady_steps(result):
    """The steps that did not plan a new cache capacity (grove marks them; ORT plans nothing)."""
    planned = result.get("step_planned", [0] * len(result["step_ms"]))
    return [ms for ms, p in zip(result["step_ms"], planned) if not p]


def measure(args):
    cfg = json.loads(Path(str(args.model).replace(".onnx", ".json")).read_text())
    weights = weight_bytes(args.model)
    out = {"model": str(args.model), "config": cfg, "weight_bytes": weights, "prompt_length": args.prompt_length,
           "new_tokens": args.new_tokens, "rounds": args.rounds, "threads": {}}
    with tempfile.TemporaryDirectory() as tmp:
        probe = bandwidth_probe(tmp)
        for threads in args.threads:
            runs = engines(args, threads)
            names = list(runs)
            seen = {n: [] for n in names}
            prefill = {n: [] for n in names}
            tokens = {}
            bandwidth = []
            for k in range(args.rounds):
                bandwidth.append(run_json([str(probe), str(threads)])["read_gb_s"])
                for n in names[k % len(names):] + names[:k % len(names)]:
                    r = runs[n]()
                    seen[n].append(statistics.median(steady_steps(r)))
                    prefill[n].append(r["prefill_ms"])
                    tokens[n] = r["tokens"]
                print(f"threads {threads} round {k + 1}: " + ", ".join(f"{n} {seen[n][-1]:.2f} ms" for n in names) +
                      f", read {bandwidth[-1]:.1f} GB/s", flush=True)
            # Cache bytes read by a step at the middle position of the generation.
            middle = args.prompt_length + args.new_tokens // 2
            cache = 2 * cfg["layers"] * cfg["hidden"] * 4 * middle
            # Each round's probe is the best of its passes; the rounds' median is the bandwidth
            # the engines met (this VM's moves by a third with its neighbours).
            gbs = statistics.median(bandwidth)
            t = {"read_gb_s": gbs, "read_gb_s_best": max(bandwidth), "read_gb_s_rounds": bandwidth, "engines": {}}
            for n in names:
                ms = statistics.median(seen[n])
                step_bytes = (weights // 2 if "bf16" in n else weights // 4 if "int8w" in n else weights) + cache
                t["engines"][n] = {"step_ms": ms, "tokens_per_s": 1000 / ms, "prefill_ms": statistics.median(prefill[n]),
                                   "rounds_step_ms": seen[n], "bytes_per_step": step_bytes,
                                   "roofline_fraction": step_bytes / (gbs * 1e9) / (ms / 1000), "tokens": tokens[n]}
            t["same_tokens_as_ort"] = {n: tokens[n] == tokens["ort_fp32"] for n in names}
            out["threads"][str(threads)] = t
    return out


def long_run(args):
    threads = max(args.threads)
    args.new_tokens = args.long
    runs = engines(args, threads)
    return {"model": str(args.model), "threads": threads, "prompt_length": args.prompt_length,
            "steps": {n: runs[n]()["step_ms"] for n in ("grove_fp32", "grove_bf16", "grove_int8w", "ort_fp32")}}


def plot(path, img):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    d = json.loads(Path(path).read_text())
    fig, ax = plt.subplots(figsize=(7, 4))
    for name, steps in d["steps"].items():
        w = 15  # moving median over 15 steps
        pos = [d["prompt_length"] + i + 1 for i in range(len(steps))]
        smooth = [1000 / statistics.median(steps[max(0, i - w):i + w + 1]) for i in range(len(steps))]
        ax.plot(pos, smooth, label=name.replace("_", " "))
    ax.set_xlabel("position (tokens in the cache)")
    ax.set_ylabel("tokens per second")
    ax.set_title(f"GPT-2-124M-shaped decoder, batch 1, {d['threads']} threads")
    ax.grid(alpha=0.3)
    ax.legend()
    out = Path(img) / "generation_tokens_per_s.png"
    fig.tight_layout()
    fig.savefig(out, dpi=110)
    print("wrote", out)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--grove", default=str(ROOT / "build/grove"))
    ap.add_argument("--model", type=Path, default=CACHE / "bench" / "gpt2_kv.onnx")
    ap.add_argument("--threads", type=lambda s: [int(x) for x in s.split(",")], default=[1, 2])
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--prompt-length", type=int, default=8)
    ap.add_argument("--new-tokens", type=int, default=64)
    ap.add_argument("--long", type=int, default=0, help="one generation of this many tokens per engine, for --plot")
    ap.add_argument("--out")
    ap.add_argument("--plot")
    ap.add_argument("--img", default=str(ROOT / "docs/img"))
    a = ap.parse_args()
    if a.plot:
        plot(a.plot, a.img)
        return
    if not a.model.exists():
        sys.exit(f"{a.model}: missing; export it with bench/models/export_decoder_models.py")
    result = long_run(a) if a.long else measure(a)
    text = json.dumps(result, indent=1)
    if a.out:
        Path(a.out).parent.mkdir(parents=True, exist_ok=True)
        Path(a.out).write_text(text + "\n")
    if not a.long:
        for threads, t in result["threads"].items():
            print(f"threads {threads}, read bandwidth {t['read_gb_s']:.1f} GB/s")
            for n, e in t["engines"].items():
                print(f"  {n:20s} {e['step_ms']:7.2f} ms/token {e['tokens_per_s']:6.1f} tokens/s "
                      f"roofline {100 * e['roofline_fraction']:5.1f}%  prefill {e['prefill_ms']:.1f} ms")


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""`grove generate` against PyTorch's greedy loop (bench/models/export_decoder_models.py):

  1. exports the tiny GPT-2-shaped and LLaMA-shaped decoders (2 layers, weights large enough
     that the greedy tokens change from step to step; LLaMA's with RoPE and grouped-query
     attention) with PyTorch's greedy continuation of three prompts;
  2. grove's tokens must equal PyTorch's: with the masked cache of spare capacity (first
     capacity 1, 4 and 64: the capacity doubles several times, once, or never), and on the
     model without attention_mask/position_ids (the cache grows by a position per step);
  3. sampling with a seed repeats itself, and another seed gives other tokens;
  4. --trace leaves stdout one JSON object with the same tokens and writes the tiles' trace;
     --pieces off (every tile whole) gives the same tokens.

Usage: generate_model_test.py --grove build/grove [--grove-args "--threads 2"]
"""
import argparse
import json
import shlex
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
NEW_TOKENS = 20


def generate(grove, model, prompt, extra):
    r = subprocess.run([grove, "generate", str(model), "--prompt-ids", ",".join(map(str, prompt)),
                        "-n", str(NEW_TOKENS), "--json"] + extra, capture_output=True, text=True)
    if r.returncode != 0:
        raise RuntimeError(f"grove generate failed: {r.stderr.strip()}")
    return json.loads(r.stdout)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--grove", required=True)
    ap.add_argument("--grove-args", default="")
    a = ap.parse_args()
    extra = shlex.split(a.grove_args)
    failures = []
    with tempfile.TemporaryDirectory(prefix="grove_generate_") as work:
        work = Path(work)
        subprocess.run(["/usr/bin/python3", str(ROOT / "bench/models/export_decoder_models.py"), "--out", str(work),
                        "--only", "gpt2_kv_tiny,gpt2_kv_tiny_nomask,llama_kv_tiny", "--reference",
                        "--new-tokens", str(NEW_TOKENS)],
                       check=True, capture_output=True)
        for name, capacities in (("gpt2_kv_tiny", (1, 4, 64)), ("gpt2_kv_tiny_nomask", (64,)), ("llama_kv_tiny", (1, 64))):
            for run in json.loads((work / f"{name}.ref.json").read_text()):
                for capacity in capacities:
                    got = generate(a.grove, work / f"{name}.onnx", run["prompt"],
                                   extra + ["--min-capacity", str(capacity)])
                    what = f"{name} prompt {run['prompt']} first capacity {capacity}"
                    if got["tokens"] != run["tokens"]:
                        failures.append(f"{what}: tokens {got['tokens']}, PyTorch's {run['tokens']}")
                    else:
                        print(f"ok: {what}: {NEW_TOKENS} tokens equal PyTorch's "
                              f"(cache {got['cache_capacity']} positions, {got['steps_planned']} steps planned)")
        model, prompt = work / "gpt2_kv_tiny.onnx", [10, 20]
        sampled = [generate(a.grove, model, prompt, extra + ["--temperature", "1", "--top-k", "20", "--seed", s])["tokens"]
                   for s in ("5", "5", "6")]
        if sampled[0] != sampled[1]:
            failures.append(f"sampling with seed 5 twice gave {sampled[0]} and {sampled[1]}")
        if sampled[0] == sampled[2]:
            failures.append(f"seeds 5 and 6 gave the same {NEW_TOKENS} tokens {sampled[0]}")
        # --trace: stdout stays one JSON object with the same tokens; the file holds the tiles of
        # one more generation (its prefill and every step), each layer's ops among them.
        trace = work / "generate.trace.json"
        plain = generate(a.grove, model, prompt, extra)["tokens"]
        traced = generate(a.grove, model, prompt, extra + ["--trace", str(trace)])["tokens"]
        events = json.loads(trace.read_text())
        events = events["traceEvents"] if isinstance(events, dict) else events
        names = " ".join(e.get("name", "") for e in events if e.get("ph") == "X")
        whole = generate(a.grove, model, prompt, extra + ["--pieces", "off"])["tokens"]
        if whole != plain:
            failures.append(f"--pieces off changed the tokens: {whole} against {plain}")
        if traced != plain:
            failures.append(f"--trace changed the tokens: {traced} against {plain}")
        elif "LayerNormalization" not in names or "MatMul" not in names:
            failures.append(f"the trace of a generation holds no LayerNormalization or MatMul tile: {names[:200]}")
        else:
            print(f"ok: --trace keeps the tokens and writes {len(events)} events")
    for f in failures:
        print("FAIL:", f)
    sys.exit(1 if failures else 0)


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""The cost of a tile with no work to speak of, through grove's whole run path (docs/runtime.md):
a chain of 1,000 tiny ops (each reads the one before) and a fan of 1,000 (each reads the
input, a tree of Sums joins them), on the barrier-free schedule and the barrier twin, at 1 and
2 threads; and the chain inside a Loop body (segmented control flow, one iteration).

  /usr/bin/python3 bench/tile_overhead.py --grove build/grove [--ops 1000] [--runs 200]

Each op is an Add of [1, 4] floats (one tile): the time per op is the run's median over the ops.
"""
import argparse
import json
import subprocess
import sys
import tempfile
from pathlib import Path

import onnx
from onnx import TensorProto, helper


def chain(n):
    nodes = [helper.make_node("Add", ["x" if i == 0 else f"v{i - 1}", "one"], [f"v{i}" if i < n - 1 else "y"], name=f"add{i}")
             for i in range(n)]
    return nodes


def fan(n):
    nodes = [helper.make_node("Add", ["x", "one"], [f"v{i}"], name=f"add{i}") for i in range(n)]
    level, k = [f"v{i}" for i in range(n)], 0
    while len(level) > 1:  # Sums of up to 8, a tree: the fan's tiles all ready at once, then joined
        nxt = []
        for j in range(0, len(level), 8):
            out = "y" if len(level) <= 8 else f"s{k}"
            nodes.append(helper.make_node("Sum", level[j:j + 8], [out], name=f"sum{k}"))
            nxt.append(out)
            k += 1
        level = nxt
    return nodes


def model(nodes, path):
    one = helper.make_tensor("one", TensorProto.FLOAT, [1, 4], [1.0] * 4)
    g = helper.make_graph(nodes, "overhead", [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])], [one])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), str(path))


def loop_model(n, path):
    body = helper.make_graph(chain(n) + [helper.make_node("Identity", ["cond_in"], ["cond_out"], name="keep")], "body",
                             [helper.make_tensor_value_info("i", TensorProto.INT64, []),
                              helper.make_tensor_value_info("cond_in", TensorProto.BOOL, []),
                              helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                             [helper.make_tensor_value_info("cond_out", TensorProto.BOOL, []),
                              helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
                             [helper.make_tensor("one", TensorProto.FLOAT, [1, 4], [1.0] * 4)])
    g = helper.make_graph([helper.make_node("Loop", ["trips", "cond", "x"], ["y"], body=body, name="loop")], "overhead_loop",
                          [helper.make_tensor_value_info("x", TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor_value_info("y", TensorProto.FLOAT, [1, 4])],
                          [helper.make_tensor("trips", TensorProto.INT64, [], [1]),
                           helper.make_tensor("cond", TensorProto.BOOL, [], [True])])
    onnx.save(helper.make_model(g, opset_imports=[helper.make_opsetid("", 13)]), str(path))


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--grove", default="build/grove")
    ap.add_argument("--ops", type=int, default=1000)
    ap.add_argument("--runs", type=int, default=200)
    args = ap.parse_args()
    work = Path(tempfile.mkdtemp(prefix="grove_overhead_"))
    model(chain(args.ops), work / "chain.onnx")
    model(fan(args.ops), work / "fan.onnx")
    loop_model(args.ops, work / "loop.onnx")
    print("| model | threads | barrier-free ns per op | barrier ns per op | barrier / barrier-free | shared, barrier-free ns per op |")
    print("| --- | ---: | ---: | ---: | ---: | ---: |")
    for name in ("chain", "fan", "loop"):
        for threads in (1, 2):
            ns = {}
            for mode in ("auto", "off"):  # as learnt (alone on the caller, for these), and shared through the pool
                r = subprocess.run([args.grove, "bench", str(work / f"{name}.onnx"), "--schedule", "both", "--threads",
                                    str(threads), "--runs", str(args.runs), "--run-alone", mode, "--json"],
                                   capture_output=True, text=True)
                if r.returncode:
                    print(f"| {name} | {threads} | failed: {r.stderr.strip()} | | | |")
                    break
                rows = {row["schedule"]: row for row in json.loads(r.stdout)["results"]}
                ns[mode] = (rows["aspen"]["p50_ms"] * 1e6 / args.ops, rows["barrier"]["p50_ms"] * 1e6 / args.ops)
            else:
                (a, b), shared = ns["auto"], ns["off"][0]
                print(f"| {name} | {threads} | {a:.0f} | {b:.0f} | {b / a:.2f} | {shared:.0f} |")

if __name__ == "__main__":
    sys.exit(main())

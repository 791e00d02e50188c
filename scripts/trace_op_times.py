#!/usr/bin/python3
"""Tile time per ONNX op type in a `grove run --trace` or `grove bench --trace` file.

Usage: trace_op_times.py MODEL.onnx TRACE.json
Tiles are named "<node name> #<tile>"; the node's op type comes from the model. Nodes a
graph pass created (not in the model) are reported by the last part of their name. A trace of
several runs (`grove bench --trace-runs N`; each tile carries its run's job id) gives, per op,
the median over the runs of the op's summed tile time in one run: one short run is a sample
of one.
"""
import collections
import json
import statistics
import sys

import onnx


def main():
    model, trace = sys.argv[1], sys.argv[2]
    op_of = {n.name: n.op_type for n in onnx.load(model, load_external_data=False).graph.node}
    with open(trace) as f:
        events = json.load(f)["traceEvents"]
    per_run = collections.defaultdict(collections.Counter)  # job -> op -> us
    tiles = collections.Counter()
    for e in events:
        if e.get("ph") != "X":
            continue
        node = e["name"].rsplit(" #", 1)[0]
        op = op_of.get(node, "(fused) " + node.split("/")[-1])
        per_run[e.get("args", {}).get("job", 0)][op] += e["dur"]
        tiles[op] += 1
    runs = max(len(per_run), 1)
    per_op = {op: statistics.median(run.get(op, 0.0) for run in per_run.values()) for op in tiles}
    total = sum(per_op.values())
    print(f"{runs} run(s) traced; per op, the median over the runs of its tile time in one run")
    print(f"| op | ms | % | tiles per run |\n|---|---:|---:|---:|")
    for op, us in sorted(per_op.items(), key=lambda kv: -kv[1]):
        print(f"| {op} | {us / 1000:.3f} | {100 * us / max(total, 1e-9):.1f} | {tiles[op] / runs:g} |")
    print(f"| total | {total / 1000:.3f} | 100 | {sum(tiles.values()) / runs:g} |")


if __name__ == "__main__":
    main()

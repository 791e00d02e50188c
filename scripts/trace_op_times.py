#!/usr/bin/python3
"""Sums the tile time of a `grove run --trace` file per ONNX op type.

Usage: trace_op_times.py MODEL.onnx TRACE.json
Tiles are named "<node name> #<tile>"; the node's op type comes from the model. Nodes a
graph pass created (not in the model) are reported by the last part of their name.
"""
import collections
import json
import sys

import onnx


def main():
    model, trace = sys.argv[1], sys.argv[2]
    op_of = {n.name: n.op_type for n in onnx.load(model, load_external_data=False).graph.node}
    with open(trace) as f:
        events = json.load(f)["traceEvents"]
    per_op = collections.Counter()
    tiles = collections.Counter()
    for e in events:
        if e.get("ph") != "X":
            continue
        node = e["name"].rsplit(" #", 1)[0]
        op = op_of.get(node, "(fused) " + node.split("/")[-1])
        per_op[op] += e["dur"]
        tiles[op] += 1
    total = sum(per_op.values())
    print(f"| op | ms | % | tiles |\n|---|---:|---:|---:|")
    for op, us in per_op.most_common():
        print(f"| {op} | {us / 1000:.1f} | {100 * us / total:.1f} | {tiles[op]} |")
    print(f"| total | {total / 1000:.1f} | 100 | {sum(tiles.values())} |")


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The include graph of the library's layers, drawn from the tree (docs/architecture.md).

Prints one line per layer -> layer edge (`#include "<layer>/..."` in a file of src/<layer>/),
with how many includes make it, the layers in the order of GROVE_LAYERS in src/CMakeLists.txt
(lowest first). An edge to a later layer runs up and is marked UP; an include that climbs out
of its folder ("../") is marked too. Exit status 1 if there is either. The build enforces the
same rule (each layer target sees only the layers it uses); this draws the picture.

  include-graph.py [--dot] [--files] [SOURCE_DIR]
    --dot    Graphviz instead (include-graph.py --dot | dot -Tsvg > layers.svg)
    --files  also name the files behind each edge
"""
import argparse
import collections
import pathlib
import re
import sys

INCLUDE = re.compile(r'^\s*#\s*include\s+"([^"]+)"', re.M)


def layer_order(src):
    text = (src / "CMakeLists.txt").read_text()
    match = re.search(r"set\(GROVE_LAYERS\s+([^)]*)\)", text)
    if not match:
        sys.exit("include-graph: no set(GROVE_LAYERS ...) in src/CMakeLists.txt")
    return match.group(1).split()


def main():
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("source_dir", nargs="?", default=pathlib.Path(__file__).resolve().parent.parent)
    parser.add_argument("--dot", action="store_true")
    parser.add_argument("--files", action="store_true")
    args = parser.parse_args()
    src = pathlib.Path(args.source_dir) / "src"
    layers = layer_order(src)
    rank = {layer: i for i, layer in enumerate(layers)}

    edges = collections.defaultdict(list)  # (from, to) -> ["file:line", ...]
    problems = []
    for layer in layers:
        for path in sorted((src / layer).iterdir()):
            if path.suffix not in (".h", ".cpp", ".inc"):
                continue
            text = path.read_text(errors="replace")
            for match in INCLUDE.finditer(text):
                target = match.group(1)
                where = f"src/{layer}/{path.name}:{text.count(chr(10), 0, match.start()) + 1}"
                if target.startswith("../") or "/../" in target:
                    problems.append(f"{where}: #include \"{target}\" climbs out of src/{layer}/")
                    continue
                to = target.split("/", 1)[0]
                if "/" in target and to in rank and to != layer:
                    edges[(layer, to)].append(where)
    folders = {p.name for p in src.iterdir() if p.is_dir()}
    for folder in sorted(folders - set(layers)):
        problems.append(f"src/{folder}/ is not in GROVE_LAYERS (src/CMakeLists.txt)")

    up = {edge for edge in edges if rank[edge[1]] > rank[edge[0]]}
    for edge in sorted(up):
        problems.append(f"{edge[0]} -> {edge[1]} runs up: " + ", ".join(edges[edge]))
    ordered = sorted(edges, key=lambda e: (rank[e[0]], rank[e[1]]))

    if args.dot:
        print("digraph layers {\n  node [shape=box];")
        for layer in layers:
            print(f"  {layer};")
        for a, b in ordered:
            style = ', color=red, penwidth=2' if (a, b) in up else ""
            print(f'  {a} -> {b} [label="{len(edges[(a, b)])}"{style}];')
        print("}")
    else:
        width = max(map(len, layers))
        for layer in reversed(layers):
            outgoing = [e for e in ordered if e[0] == layer]
            if not outgoing:
                print(f"{layer:>{width}}  (includes no other layer)")
            for a, b in outgoing:
                mark = "  UP" if (a, b) in up else ""
                print(f"{a:>{width}} -> {b:<{width}} {len(edges[(a, b)]):4} includes{mark}")
                if args.files:
                    for where in edges[(a, b)]:
                        print(f"{'':>{width}}      {where}")
        print(f"{len(edges)} edges between {len(layers)} layers, {len(up)} running up")
    for problem in problems:
        print("include-graph: " + problem, file=sys.stderr)
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())

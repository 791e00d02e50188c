#!/usr/bin/python3
"""ONNX Runtime's time per node, from its profiler, for comparing with grove's traced tiles.

  python3 bench/ort_node_times.py MODEL.onnx --threads 1 --runs 20 --out ort_nodes.json

Needs the onnxruntime Python package (the lent device machine has it; Debian does not). Runs
3 warm-up runs and `runs` profiled runs; writes, per node, ORT's op type and the median of its
kernel time over the runs (microseconds), and the median run latency.
"""
import argparse
import collections
import json
import os
import statistics
import tempfile
import time

import numpy as np
import onnxruntime as ort


def main():
    p = argparse.ArgumentParser()
    p.add_argument("model")
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--runs", type=int, default=20)
    p.add_argument("--out", required=True)
    a = p.parse_args()
    folder, name = os.path.dirname(a.model), os.path.basename(a.model)[:-5]
    feeds = {f[len(name) + 4:-4]: np.load(os.path.join(folder, f)) for f in os.listdir(folder)
             if f.startswith(name + ".in.") and f.endswith(".npy")}
    so = ort.SessionOptions()
    so.intra_op_num_threads, so.inter_op_num_threads = a.threads, 1
    so.execution_mode = ort.ExecutionMode.ORT_SEQUENTIAL
    so.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
    so.enable_profiling = True
    so.profile_file_prefix = os.path.join(tempfile.mkdtemp(), "ort")
    s = ort.InferenceSession(a.model, so, providers=["CPUExecutionProvider"])
    for _ in range(3):
        s.run(None, feeds)
    ms = []
    for _ in range(a.runs):
        t = time.perf_counter()
        s.run(None, feeds)
        ms.append((time.perf_counter() - t) * 1e3)
    events = json.load(open(s.end_profiling()))
    per_node, op_of = collections.defaultdict(list), {}
    for e in events:
        if e.get("cat") != "Node" or not e["name"].endswith("_kernel_time"):
            continue
        node = e["name"][: -len("_kernel_time")]
        per_node[node].append(e["dur"])
        op_of[node] = e.get("args", {}).get("op_name", "")
    # The first 3 entries of each node are the warm-up runs.
    nodes = {n: {"op": op_of[n], "us": statistics.median(v[3:] or v)} for n, v in per_node.items()}
    json.dump({"model": name, "threads": a.threads, "median_ms": statistics.median(ms), "nodes": nodes},
              open(a.out, "w"), indent=1)
    print(f"{name} t{a.threads}: ORT median {statistics.median(ms):.2f} ms, "
          f"node sum {sum(v['us'] for v in nodes.values()) / 1e3:.2f} ms, {len(nodes)} nodes")


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""grove against ONNX Runtime's Python package at several thread counts, for machines with more
cores than this project's (the lent 16-core device machine has onnxruntime installed; Debian
has no package for it, so on the 2-core machines use bench/suite.py's Node runner instead).

  python3 bench/threads_vs_ort.py --grove build/grove --models DIR --only resnet50_b1 \
      --threads 1,2,4,8,16 --runs 20 --rounds 2 --out threads.json

Per model and thread count it alternates ORT and grove `rounds` times (each round: ORT's
median of `runs` runs in this process, then `grove bench --threads N --runs R --json`), and
reports the median of the round medians. Inputs are the exported NAME.in.*.npy files.
"""
import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def model_inputs(folder, name):
    import numpy as np
    feeds, flags = {}, []
    for f in sorted(os.listdir(folder)):
        if f.startswith(name + ".in.") and f.endswith(".npy"):
            key = f[len(name) + 4:-4]
            feeds[key] = np.load(os.path.join(folder, f))
            flags += ["--input", key + "=" + os.path.join(folder, f)]
    return feeds, flags


def ort_median(session, feeds, runs):
    for _ in range(3):
        session.run(None, feeds)
    ms = []
    for _ in range(runs):
        t = time.perf_counter()
        session.run(None, feeds)
        ms.append((time.perf_counter() - t) * 1e3)
    return statistics.median(ms)


def grove_median(grove, path, flags, threads, runs):
    cmd = [grove, "bench", path, "--threads", str(threads), "--runs", str(runs), "--warmup", "3", "--json"] + flags
    out = subprocess.run(cmd, check=True, capture_output=True, text=True).stdout
    return json.loads(out)["results"][0]["p50_ms"]


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--grove", default="build/grove")
    ap.add_argument("--models", default=os.path.expanduser("~/.cache/grove/bench"))
    ap.add_argument("--only", default="resnet50_b1")
    ap.add_argument("--threads", default="1,2,4,8,16")
    ap.add_argument("--runs", type=int, default=20)
    ap.add_argument("--rounds", type=int, default=2)
    ap.add_argument("--out", default="threads_vs_ort.json")
    a = ap.parse_args()
    import onnxruntime as ort
    results = {"onnxruntime": ort.__version__, "rows": []}
    for name in a.only.split(","):
        path = os.path.join(a.models, name + ".onnx")
        if not os.path.exists(path):
            print(f"skip {name}: {path} not found", file=sys.stderr)
            continue
        feeds, flags = model_inputs(a.models, name)
        for n in map(int, a.threads.split(",")):
            opts = ort.SessionOptions()
            opts.intra_op_num_threads = n
            opts.inter_op_num_threads = 1
            session = ort.InferenceSession(path, opts, providers=["CPUExecutionProvider"])
            o, g = [], []
            for _ in range(a.rounds):
                o.append(ort_median(session, feeds, a.runs))
                g.append(grove_median(a.grove, path, flags, n, a.runs))
            row = {"model": name, "threads": n, "ort_ms": statistics.median(o), "grove_ms": statistics.median(g)}
            row["ort_over_grove"] = row["ort_ms"] / row["grove_ms"]
            print(json.dumps(row), flush=True)
            results["rows"].append(row)
            with open(a.out, "w") as f:
                json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()

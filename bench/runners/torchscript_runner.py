#!/usr/bin/python3
"""TorchScript side of the benchmark suite: one process = one round.

  /usr/bin/python3 torchscript_runner.py --model M.pt --input NAME=FILE.npy ... --threads N
                                         --warmup W --runs R [--outputs DIR]

The model is the traced + frozen module saved by export_bench_models.py. torch.set_num_threads(N)
(intra-op), one inter-op thread, torch.inference_mode. Prints one JSON line: load_ms, the timed
runs' latencies (ms) and their median; with --outputs writes DIR/<output name>.npy, named from
the manifest's output order (NAME.json beside the model).
"""
import argparse
import json
import os
import statistics
import sys
import time


def main() -> int:
    p = argparse.ArgumentParser()
    p.add_argument("--model", required=True)
    p.add_argument("--input", action="append", default=[])
    p.add_argument("--threads", type=int, default=1)
    p.add_argument("--warmup", type=int, default=1)
    p.add_argument("--warmup-seconds", type=float, default=0.0,
                   help="untimed runs go on until this many seconds have passed")
    p.add_argument("--runs", type=int, default=3)
    p.add_argument("--outputs")
    a = p.parse_args()

    # Before torch loads: the OpenMP pool (torch's and OpenBLAS-openmp's) gets N threads too.
    os.environ["OMP_NUM_THREADS"] = str(a.threads)
    import numpy as np
    import torch
    torch.set_num_threads(a.threads)
    torch.set_num_interop_threads(1)
    inputs = []
    for spec in a.input:  # in graph-input order, as the suite passes them
        _, file = spec.split("=", 1)
        inputs.append(torch.from_numpy(np.load(file)))
    t0 = time.perf_counter()
    model = torch.jit.load(a.model).eval()
    load_ms = (time.perf_counter() - t0) * 1e3
    ms = []
    out = None
    with torch.inference_mode():
        warm_start, warm_runs = time.perf_counter(), 0
        while warm_runs < a.warmup or time.perf_counter() - warm_start < a.warmup_seconds:
            out = model(*inputs)
            warm_runs += 1
        for _ in range(a.runs):
            t = time.perf_counter()
            out = model(*inputs)
            ms.append((time.perf_counter() - t) * 1e3)
        if a.outputs:
            if out is None:
                out = model(*inputs)
            if isinstance(out, torch.Tensor):
                out = (out,)
            with open(os.path.splitext(a.model)[0] + ".json") as f:
                names = [o["name"] for o in json.load(f)["outputs"]]
            for name, tensor in zip(names, out):
                np.save(os.path.join(a.outputs, f"{name}.npy"), tensor.numpy())
    print(json.dumps({"engine": "torchscript", "version": torch.__version__, "threads": a.threads,
                      "load_ms": load_ms, "ms": ms,
                      "median_ms": statistics.median(ms) if ms else None}))
    return 0


if __name__ == "__main__":
    sys.exit(main())

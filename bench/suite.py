#!/usr/bin/python3
"""grove's side-by-side benchmark suite: grove (aspen and barrier schedules), ONNX Runtime
1.20.1 (onnxruntime-node) and TorchScript (Debian's torch), on the workloads exported by
bench/models/export_bench_models.py, then docs/benchmarks.md from the results (bench/report.py).

  bench/run-suite.sh                       # everything: 10 workloads, 1..nproc threads
  bench/run-suite.sh --quick               # CI: mobilenet_v2_b1, 3 runs, every engine
  bench/run-suite.sh --models convstack,mobilenet_v2_b1 --threads 1,2 --rounds 3 --runs 4

Per workload: every engine runs once on the stored inputs and its outputs must agree with the
stored PyTorch outputs (max abs error <= 1e-3 x max |reference|); an engine that disagrees or
fails is reported FAILED and not timed. Then, per thread count, rounds interleave the engines
(A B C D A B C D ...). A round is one fresh process per engine doing --warmup untimed runs (and
more until --warmup-seconds have passed) and
--runs timed runs; each engine's latency is the median of all its timed runs (rounds x runs).
Extras: the FMA peak probe, grove co-execution of ResNet-50 + BERT-base, the
tiles-per-layer sweep on ConvStack, and token-by-token decoding against ONNX Runtime's greedy
loop (bench/generate.py). Results go to --out (JSON), then bench/report.py.
"""
import argparse
import datetime
import json
import shlex
import os
import statistics
import subprocess
import sys
import tempfile
import time

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, HERE)
import suite_engines as engines  # noqa: E402
import suite_extras as extras  # noqa: E402

ALL_MODELS = ["mobilenet_v2_b1", "resnet50_b1", "resnet50_b8", "vgg16_b1", "googlenet_b1", "squeezenet_b1", "yolov3_416_b1",
              "convstack", "bert_base_s128_b1", "bert_base_s128_b8", "bert_large_s128_b1",
              "gpt2_s256_b1"]
QUICK_MODEL = "mobilenet_v2_b1"
TOLERANCE = 1e-3  # max abs error <= TOLERANCE x max |reference|


def log(message: str) -> None:
    print(f"[{time.strftime('%H:%M:%S')}] {message}", flush=True)


def parse_args():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--models", help=f"comma-separated workloads (default: all {len(ALL_MODELS)})")
    p.add_argument("--threads", help="comma-separated thread counts (default: 1..nproc)")
    p.add_argument("--rounds", type=int, default=3, help="interleaved rounds per thread count")
    p.add_argument("--runs", type=int, default=4, help="timed runs per round (>= 10 in all: "
                   "rounds x runs)")
    p.add_argument("--warmup", type=int, default=2, help="untimed runs per round (at least)")
    p.add_argument("--warmup-seconds", type=float, default=0.5,
                   help="untimed runs per round go on until this many seconds have passed: a fresh grove "
                        "process ran its first ~200 ms up to 40%% slower on a KVM guest (docs/benchmarks.md)")
    p.add_argument("--engines", default=",".join(engines.ENGINES), help="subset of engines")
    p.add_argument("--quick", action="store_true",
                   help=f"{QUICK_MODEL}, nproc threads, 1 round of 3 runs, every engine, "
                        "no co-execution or sweep; exits 1 on any disagreement or failure")
    p.add_argument("--no-extras", action="store_true", help="skip co-execution and the sweep")
    p.add_argument("--check-only", action="store_true",
                   help="only the output-agreement runs: no timing, no extras, no report")
    p.add_argument("--sweep", default="1,2,4,8,16,32,64", help="ConvStack tiles per op")
    p.add_argument("--out", default=os.path.join(ROOT, "docs", "benchmarks.json"),
                   help="results JSON (the full run commits it beside docs/benchmarks.md)")
    p.add_argument("--report", default=os.path.join(ROOT, "docs", "benchmarks.md"),
                   help="markdown to write with bench/report.py ('' to skip)")
    p.add_argument("--grove", default=os.path.join(ROOT, "build", "grove"), help="grove binary")
    p.add_argument("--cache", default=os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"), "grove", "bench"))
    p.add_argument("--skip-install", action="store_true", help="peers already installed")
    a = p.parse_args()
    if a.quick:
        a.models = a.models or QUICK_MODEL
        a.threads = a.threads or str(os.cpu_count())
        a.rounds, a.runs, a.warmup, a.warmup_seconds, a.no_extras = 1, 3, 1, 0.0, True
    if a.check_only:
        a.no_extras, a.report = True, ""
    a.models = a.models.split(",") if a.models else ALL_MODELS
    a.threads = [int(t) for t in a.threads.split(",")] if a.threads else \
        list(range(1, os.cpu_count() + 1))
    a.engines = a.engines.split(",")
    return a


def prepare(a):
    """Peers, exported models (.onnx, .npy, .pt), the FMA probe; returns peer paths."""
    if not a.skip_install:
        log("peers: bench/peers/install.sh (installs only what is missing)")
        out = subprocess.run([os.path.join(HERE, "peers", "install.sh")], check=True,
                             stdout=subprocess.PIPE, stdin=subprocess.DEVNULL, text=True)
        peers_dir = out.stdout.strip().splitlines()[-1]
    else:
        peers_dir = engines.default_peers_dir()
    log(f"exporting missing workloads into {a.cache}")
    subprocess.run(["/usr/bin/python3", os.path.join(HERE, "models", "export_bench_models.py"),
                    "--out", a.cache, "--only", ",".join(a.models)], check=True,
                   stdin=subprocess.DEVNULL)
    if not os.access(a.grove, os.X_OK):
        sys.exit(f"suite: {a.grove} not found: build grove first (cmake --build build)")
    return peers_dir


def agree(engine, ctx, manifest) -> dict:
    """Runs the engine once on the stored inputs; compares each output with PyTorch's."""
    import numpy as np
    with tempfile.TemporaryDirectory() as out_dir:
        start = time.perf_counter()
        try:
            engines.run_once(engine, ctx, manifest, out_dir)
        except engines.EngineError as e:
            return {"ok": False, "error": str(e)}
        result = {"ok": True, "seconds": round(time.perf_counter() - start, 2), "outputs": {}}
        for o in manifest["outputs"]:
            ref = np.load(os.path.join(ctx.cache, o["file"]))
            path = os.path.join(out_dir, o["name"] + ".npy")
            if not os.path.isfile(path):
                return {"ok": False, "error": f"no output {o['name']}"}
            got = np.load(path).astype(np.float32)
            if got.shape != ref.shape:
                return {"ok": False, "error": f"{o['name']}: shape {got.shape} != {ref.shape}"}
            err, bound = float(np.abs(got - ref).max()), TOLERANCE * float(np.abs(ref).max())
            result["outputs"][o["name"]] = {"max_abs_err": err, "bound": bound}
            if not err <= bound:  # NaN fails too
                result["ok"] = False
                result["error"] = f"{o['name']}: max abs error {err:.3g} > {bound:.3g}"
        return result


class Eta:
    """Predicts the timing phase from GFLOPs (a rough prior), then rescales the prediction by
    how the steps done so far compared with it."""

    RATE = 40.0  # GFLOP/s per thread: a rough guess over engines and workloads on Zen 4

    def __init__(self, a, gflops):
        self.a, self.gflops = a, gflops
        self.extras = self.extras_seconds()
        self.predicted_done = self.actual_done = 0.0

    def step_seconds(self, model, threads):
        runs = self.a.warmup + self.a.runs
        return 1.5 + self.a.warmup_seconds + runs * self.gflops.get(model, 10.0) / (self.RATE * threads)

    def extras_seconds(self):
        if self.a.no_extras:
            return 0.0
        n = max(self.a.threads)
        coexec = (2 * max(10, self.a.runs) + 2) * (8.2 + 22.0) / (self.RATE * n)  # ResNet + BERT
        sweep = len(self.a.sweep.split(",")) * 2 * (max(3, self.a.runs) + 1) * 38.7 / (self.RATE * n)
        return 10 + coexec + sweep

    def agreement_seconds(self):
        return sum(4 + 3 * self.gflops.get(m, 10.0) / (self.RATE * os.cpu_count())
                   for m in self.a.models) * len(self.a.engines)

    def total_predicted(self):
        return self.agreement_seconds() + self.extras + self.a.rounds * len(self.a.engines) * sum(
            self.step_seconds(m, t) for m in self.a.models for t in self.a.threads)

    def done(self, model, threads, seconds):
        self.predicted_done += self.step_seconds(model, threads)
        self.actual_done += seconds

    def remaining(self):  # timing phase and extras (the agreement runs are short)
        left = self.total_predicted() - self.predicted_done - self.agreement_seconds()
        scale = self.actual_done / self.predicted_done if self.predicted_done else 1.0
        return max(0.0, left * scale)


def main() -> int:
    a = parse_args()
    started = time.time()
    peers_dir = prepare(a)
    ctx = engines.Context(grove=a.grove, cache=a.cache, peers_dir=peers_dir,
                          warmup=a.warmup, warmup_seconds=a.warmup_seconds, runs=a.runs)
    results = {"command": shlex.join(["bench/run-suite.sh"] + sys.argv[1:]),
               "date": datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%d %H:%M UTC"),
               "settings": {"models": a.models, "threads": a.threads, "rounds": a.rounds,
                            "runs": a.runs, "warmup": a.warmup, "warmup_seconds": a.warmup_seconds, "engines": a.engines,
                            "tolerance": TOLERANCE, "process_per_round": True},
               "machine": extras.machine(os.path.join(HERE, "fma_peak.cpp"), peers_dir, log),
               "workloads": {}}
    manifests = {m: json.load(open(os.path.join(a.cache, f"{m}.json"))) for m in a.models}
    gflops = {m: engines.grove_gflop(ctx, manifests[m]) for m in a.models}
    eta = Eta(a, gflops)
    log(f"estimated run time: {eta.total_predicted() / 60:.1f} min (rough, from GFLOPs at "
        f"{Eta.RATE:.0f} GFLOP/s per thread; the ETA after each round corrects it)")
    failed = False
    for i, model in enumerate(a.models, 1):
        manifest = manifests[model]
        w = results["workloads"][model] = {
            "gflop": gflops[model], "batch": manifest["inputs"][0]["shape"][0],
            "description": manifest["description"], "agreement": {}, "median_ms": {}, "ms": {}}
        live = []
        for engine in a.engines:
            r = agree(engine, ctx, manifest)
            w["agreement"][engine] = r
            log(f"[{i}/{len(a.models)}] {model}: {engine} agreement "
                f"{'ok' if r['ok'] else 'FAILED: ' + r['error']}")
            if r["ok"]:
                live.append(engine)
            else:
                failed = True
        for threads in (a.threads if live and not a.check_only else []):
            if "grove-tuned" in live:
                try:
                    summary = engines.tune(ctx, manifest, threads)
                    w.setdefault("tuning", {})[str(threads)] = summary
                    log(f"[{i}/{len(a.models)}] {model} {threads}T grove tune: {summary}")
                except engines.EngineError as e:
                    log(f"{model} grove tune {threads}T: FAILED: {e}")
                    w["agreement"]["grove-tuned"] = {"ok": False, "error": str(e)}
                    live.remove("grove-tuned")
                    failed = True
            for rnd in range(a.rounds):
                for engine in list(live):  # interleaved: A B C D A B C D ...
                    step_start = time.perf_counter()
                    try:
                        ms = engines.run_round(engine, ctx, manifest, threads)
                    except engines.EngineError as e:
                        log(f"{model} {engine} {threads}T: FAILED: {e}")
                        w["agreement"][engine] = {"ok": False, "error": str(e)}
                        live.remove(engine)
                        failed = True
                        continue
                    w["ms"].setdefault(engine, {}).setdefault(str(threads), []).extend(ms)
                    eta.done(model, threads, time.perf_counter() - step_start)
                log(f"[{i}/{len(a.models)}] {model} {threads}T round {rnd + 1}/{a.rounds}: " +
                    "  ".join(f"{e} {statistics.median(w['ms'][e][str(threads)]):.2f} ms"
                              for e in live) + f"   ETA {eta.remaining() / 60:.1f} min")
            for engine in live:
                w["median_ms"].setdefault(engine, {})[str(threads)] = \
                    statistics.median(w["ms"][engine][str(threads)])
        save(results, a.out)
    if not a.no_extras:
        results["coexec"] = extras.coexec(ctx, a, log)
        results["tiles_sweep"] = extras.tiles_sweep(ctx, a, log)
        results["decode"] = extras.decode(ctx, a, log)
    results["wall_minutes"] = round((time.time() - started) / 60, 1)
    save(results, a.out)
    log(f"results: {a.out} ({results['wall_minutes']} min)")
    if a.report:
        subprocess.run(["/usr/bin/python3", os.path.join(HERE, "report.py"), a.out,
                        "--out", a.report], check=True)
    if failed:
        log("FAILED: an engine disagreed with the reference or failed (see above)")
        return 1
    return 0


def save(results, path):
    os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    tmp = path + ".partial"
    with open(tmp, "w") as f:
        json.dump(results, f, indent=1)
    os.replace(tmp, path)


if __name__ == "__main__":
    sys.exit(main())

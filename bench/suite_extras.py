"""The benchmark suite's extras: the machine and its measured FP32 peak (bench/fma_peak.cpp),
grove's co-execution of ResNet-50 + BERT-base, and the tiles-per-layer sweep on ConvStack
(the paper's Fig. 10(a))."""
import json
import os
import subprocess

HERE = os.path.dirname(os.path.abspath(__file__))
COEXEC_MODELS = ["resnet50_b1", "bert_base_s128_b1"]
ISA_FLAGS = ["avx2", "fma", "avx512f", "avx512bw", "avx512vl", "avx512_vnni", "avx512_bf16",
             "amx_tile"]


def cpu_info():
    model, flags = "unknown", set()
    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                key, _, value = line.partition(":")
                if key.strip() == "model name":
                    model = value.strip()
                elif key.strip() == "flags":
                    flags = set(value.split())
    except OSError:
        pass
    return model, [f for f in ISA_FLAGS if f in flags]


def fma_peak(source: str, build_dir: str, threads: int, seconds: float):
    """Builds the probe (once per source change) and runs it: GFLOP/s on 1 and N threads."""
    binary = os.path.join(build_dir, "fma_peak")
    if not os.path.isfile(binary) or os.path.getmtime(binary) < os.path.getmtime(source):
        os.makedirs(build_dir, exist_ok=True)
        subprocess.run(["g++", "-O2", "-std=c++17", "-pthread", source, "-o", binary], check=True)
    best = None
    for _ in range(3):  # best of three: a busy machine only ever lowers the number
        out = subprocess.run([binary, str(threads), str(seconds)], check=True,
                             stdout=subprocess.PIPE, text=True).stdout
        r = json.loads(out)
        if best is None:
            best = r
        for key in ("gflops_1_thread", "gflops_n_threads"):
            best[key] = max(best[key], r[key])
    return best


def machine(probe_source: str, peers_dir: str, log):
    model, isa = cpu_info()
    cores = os.cpu_count()
    log(f"machine: {model}, {cores} cores, {' '.join(isa)}; measuring FMA peak")
    peak = fma_peak(probe_source, peers_dir, cores, 0.5)
    log(f"FMA peak ({peak['isa']}): {peak['gflops_1_thread']:.1f} GFLOP/s on 1 thread, "
        f"{peak['gflops_n_threads']:.1f} on {cores}")
    return {"cpu": model, "cores": cores, "isa": isa, "peak": peak}


def ensure_exported(a, names):
    subprocess.run(["/usr/bin/python3", os.path.join(HERE, "models", "export_bench_models.py"),
                    "--out", a.cache, "--only", ",".join(names)], check=True,
                   stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL)


def input_args(a, name):
    with open(os.path.join(a.cache, f"{name}.json")) as f:
        manifest = json.load(f)
    args = []
    for i in manifest["inputs"]:
        args += ["--input", f"{i['name']}={os.path.join(a.cache, i['file'])}"]
    return manifest, args


def grove_json(cmd):
    r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                       stdin=subprocess.DEVNULL)
    if r.returncode != 0:
        return {"error": r.stderr.strip().splitlines()[-1] if r.stderr.strip() else "failed"}
    return json.loads(r.stdout.strip().splitlines()[-1])


def coexec(ctx, a, log):
    """ResNet-50 and BERT-base submitted together into one engine vs one after the other."""
    ensure_exported(a, COEXEC_MODELS)
    threads = max(a.threads)
    cmd = [ctx.grove, "bench", "--threads", str(threads), "--warmup", "1",
           "--runs", str(max(10, a.runs)), "--json"]
    for name in COEXEC_MODELS:
        manifest, args = input_args(a, name)
        cmd += [os.path.join(a.cache, manifest["onnx"])] + args
    log(f"co-execution: {' + '.join(COEXEC_MODELS)} at {threads} threads")
    result = grove_json(cmd)
    if "error" not in result:
        log(f"co-execution: together {result['together_per_s']:.2f}/s, one after the other "
            f"{result['in_turn_per_s']:.2f}/s ({result['speedup']:.2f}x)")
    return dict(result, names=COEXEC_MODELS)


def decode(ctx, a, log):
    """Token-by-token generation (bench/generate.py): grove fp32 (both schedules), bf16 and int8
    weights against ONNX Runtime's own greedy loop on the GPT-2-124M-shaped decoder with its
    KV cache, at each thread count of the run."""
    model = os.path.join(a.cache, "gpt2_kv.onnx")
    if not os.path.isfile(model):
        subprocess.run(["/usr/bin/python3", os.path.join(HERE, "models", "export_decoder_models.py"), "--out", a.cache,
                        "--only", "gpt2_kv"], check=True, stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL,
                       stderr=subprocess.DEVNULL)
    out = os.path.join(a.cache, "decode.partial.json")
    log(f"decode: gpt2_kv, {a.rounds} rounds at {','.join(map(str, a.threads))} threads")
    r = subprocess.run(["/usr/bin/python3", os.path.join(HERE, "generate.py"), "--grove", ctx.grove, "--model", model,
                        "--threads", ",".join(map(str, a.threads)), "--rounds", str(a.rounds), "--new-tokens", "32",
                        "--out", out], stdin=subprocess.DEVNULL, capture_output=True, text=True)
    if r.returncode != 0:
        return {"error": (r.stderr.strip().splitlines() or ["failed"])[-1]}
    with open(out) as f:
        result = json.load(f)
    os.remove(out)
    for threads, t in result["threads"].items():
        e = t["engines"]
        log(f"decode {threads}T: grove {e['grove_fp32']['tokens_per_s']:.1f} tokens/s, ORT "
            f"{e['ort_fp32']['tokens_per_s']:.1f}, grove int8w {e['grove_int8w']['tokens_per_s']:.1f}")
    return result


def tiles_sweep(ctx, a, log):
    """grove on ConvStack at each --tiles-per-op K, both schedules interleaved run by run."""
    ensure_exported(a, ["convstack"])
    manifest, args = input_args(a, "convstack")
    threads = max(a.threads)
    rows = []
    for k in [int(x) for x in a.sweep.split(",")]:
        cmd = [ctx.grove, "bench", os.path.join(a.cache, manifest["onnx"]), "--threads",
               str(threads), "--tiles-per-op", str(k), "--schedule", "both", "--warmup", "1",
               "--runs", str(max(3, a.runs))] + args + ["--json"]
        r = grove_json(cmd)
        if "error" in r:
            log(f"tiles sweep K={k}: FAILED: {r['error']}")
            rows.append({"tiles_per_op": k, "error": r["error"]})
            continue
        p50 = {x["schedule"]: x["p50_ms"] for x in r["results"]}
        log(f"tiles sweep K={k}: aspen {p50['aspen']:.1f} ms, barrier {p50['barrier']:.1f} ms")
        rows.append({"tiles_per_op": k, "tiles": r["tiles"], "gflop": r["gflop"],
                     "aspen_ms": p50["aspen"], "barrier_ms": p50["barrier"]})
    return {"model": "convstack", "threads": threads, "rows": rows}

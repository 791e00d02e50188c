#!/usr/bin/python3
"""Turns a benchmark-suite results JSON (bench/suite.py --out) into docs/benchmarks.md and
its plots (docs/img/bench_*.png, Debian's python3-matplotlib).

  /usr/bin/python3 bench/report.py bench-results.json [--out docs/benchmarks.md]

Numbers: the median latency per engine and thread count; grove's speedup over the best peer
(peer median / grove-aspen median); % of measured peak = GFLOPs / latency / peak, with the
peak of the FMA probe at that thread count; the Karp-Flatt experimental parallel fraction
p_e = 1 - (1/psi - 1/N) / (1 - 1/N), psi = T1 / TN (paper section 4.2).
"""
import argparse
import json
import os
import sys

GROVE = "grove-aspen"
PEERS = ["ort", "torchscript"]
TARGET_RATIO = 0.6  # the project's target: grove <= 0.6x the best peer's median at 2 threads
LABELS = {"grove-aspen": "grove (aspen)", "grove-tuned": "grove (aspen, tuned)", "grove-barrier": "grove (barrier)",
          "ort": "ONNX Runtime 1.20.1", "torchscript": "TorchScript"}


def peak_gflops(machine, threads):
    p = machine["peak"]
    if threads >= machine["cores"]:
        return p["gflops_n_threads"]
    return p["gflops_1_thread"] * threads


def karp_flatt(t1, tn, n):
    if not t1 or not tn or n < 2:
        return None
    psi = t1 / tn
    return 1 - (1 / psi - 1 / n) / (1 - 1 / n)


def best_peer(medians, threads):
    got = [(medians[p][threads], p) for p in PEERS if threads in medians.get(p, {})]
    return min(got) if got else (None, None)


def fmt(x, spec=".2f", none="–"):
    return none if x is None else format(x, spec)


def workload_section(name, w, machine, threads_list, lines, behind):
    med = w["median_ms"]
    lines.append(f"### {name}\n\n{w['description']}; {w['gflop']:.2f} GFLOPs per inference "
                 f"(batch {w['batch']}).\n")
    lines.append("| engine | agreement | " + " | ".join(f"{t} thr ms" for t in threads_list) +
                 " | % peak | Karp-Flatt p_e |")
    lines.append("|---|---|" + "---|" * len(threads_list) + "---|---|")
    top = threads_list[-1]
    for engine in w["agreement"]:
        a = w["agreement"][engine]
        ok = "ok (err {:.1e})".format(max(o["max_abs_err"] for o in a["outputs"].values())) \
            if a["ok"] and a.get("outputs") else ("ok" if a["ok"] else f"**FAILED**: {a['error']}")
        m = med.get(engine, {})
        cells = [fmt(m.get(str(t))) for t in threads_list]
        tn = m.get(str(top))
        pct = 100 * w["gflop"] / (tn / 1e3) / peak_gflops(machine, top) if tn else None
        pe = karp_flatt(m.get("1"), tn, top) if str(1) in m else None
        lines.append(f"| {LABELS.get(engine, engine)} | {ok} | " + " | ".join(cells) +
                     f" | {fmt(pct, '.0f')} | {fmt(pe, '.2f')} |")
    lines.append("")
    for t in threads_list:
        g = med.get(GROVE, {}).get(str(t))
        peer_ms, peer = best_peer({e: v for e, v in med.items()}, str(t))
        if g and peer_ms and g > TARGET_RATIO * peer_ms:
            verb = "behind" if g > peer_ms else "short of the 0.6x target against"
            behind.append(f"- **{name}, {t} thread{'s' if t > 1 else ''}**: grove is {verb} {LABELS[peer]}: "
                          f"{g:.2f} ms vs {peer_ms:.2f} ms ({g / peer_ms:.2f}x its latency).")


def summary_table(results, top, lines):
    machine = results["machine"]
    lines.append(f"| workload | GFLOPs | grove ms | best peer | peer ms | grove speedup | "
                 f"grove % of peak |")
    lines.append("|---|---|---|---|---|---|---|")
    for name, w in results["workloads"].items():
        g = w["median_ms"].get(GROVE, {}).get(str(top))
        peer_ms, peer = best_peer(w["median_ms"], str(top))
        speedup = peer_ms / g if g and peer_ms else None
        pct = 100 * w["gflop"] / (g / 1e3) / peak_gflops(machine, top) if g else None
        lines.append(f"| {name} | {w['gflop']:.2f} | {fmt(g)} | {LABELS.get(peer, '–')} | "
                     f"{fmt(peer_ms)} | {fmt(speedup, '.2f')}x | {fmt(pct, '.0f')} |")
    lines.append("")


def coexec_section(c, lines):
    lines.append("## Co-execution\n")
    if "error" in c:
        lines.append(f"FAILED: {c['error']}\n")
        return
    lines.append(f"{' and '.join(c['names'])} submitted together into one grove engine vs one "
                 f"after the other, {c['threads']} threads, median of {c['rounds']} rounds.\n")
    lines.append("| | round ms | inferences/s |\n|---|---|---|")
    lines.append(f"| together | {c['together_p50_ms']:.1f} | {c['together_per_s']:.2f} |")
    lines.append(f"| one after the other | {c['in_turn_p50_ms']:.1f} | {c['in_turn_per_s']:.2f} |")
    lines.append(f"\nThroughput gain from co-execution: **{c['speedup']:.2f}x**.\n")


def decode_section(d, lines):
    lines.append("## Decode (token by token)\n")
    if "error" in d:
        lines.append(f"FAILED: {d['error']}\n")
        return
    lines.append(f"`bench/generate.py`: GPT-2-124M-shaped decoder with its KV cache, batch 1, "
                 f"{d['new_tokens']} new tokens after {d['prompt_length']}, median of {d['rounds']} rounds; "
                 "roofline = bytes a step reads / the best read bandwidth measured in the run "
                 "(docs/generation.md).\n")
    lines.append("| threads | engine | ms/token | tokens/s | vs ORT | roofline |\n|---|---|---|---|---|---|")
    for threads, t in d["threads"].items():
        ort = t["engines"]["ort_fp32"]["tokens_per_s"]
        for name, e in t["engines"].items():
            lines.append(f"| {threads} | {name.replace('_', ' ')} | {e['step_ms']:.2f} | {e['tokens_per_s']:.1f} | "
                         f"{e['tokens_per_s'] / ort:.2f}x | {100 * e['roofline_fraction']:.0f}% |")
    lines.append("")


def sweep_section(s, lines):
    lines.append("## Tiles per layer (ConvStack, the paper's Fig. 10(a))\n")
    lines.append(f"grove on ConvStack at {s['threads']} threads, `--tiles-per-op K`, both "
                 "schedules interleaved run by run.\n")
    lines.append("| K | tiles | aspen ms | barrier ms | barrier / aspen |\n|---|---|---|---|---|")
    for r in s["rows"]:
        if "error" in r:
            lines.append(f"| {r['tiles_per_op']} | FAILED: {r['error']} | | | |")
        else:
            lines.append(f"| {r['tiles_per_op']} | {r['tiles']} | {r['aspen_ms']:.1f} | "
                         f"{r['barrier_ms']:.1f} | {r['barrier_ms'] / r['aspen_ms']:.2f} |")
    lines.append("\n![tiles sweep](img/bench_tiles_sweep.png)\n")


def render(results, json_path):
    machine = results["machine"]
    s = results["settings"]
    threads_list = s["threads"]
    top = threads_list[-1]
    peak = machine["peak"]
    lines = ["# Benchmarks\n",
             f"Generated by `bench/report.py` from the results of `{results['command']}` "
             f"({results.get('wall_minutes', '?')} min). "
             "Regenerate: `bench/run-suite.sh` (see the README's Benchmarks section).\n",
             "## Machine\n",
             f"- CPU: {machine['cpu']}, {machine['cores']} cores",
             f"- ISA: {' '.join(machine['isa'])}",
             f"- Measured FP32 FMA peak (`bench/fma_peak.cpp`, {peak['isa']}): "
             f"{peak['gflops_1_thread']:.1f} GFLOP/s on 1 thread, {peak['gflops_n_threads']:.1f} "
             f"on {machine['cores']}\n",
             "## Method\n",
             f"Engines: {', '.join(LABELS.get(e, e) for e in s['engines'])}. Before timing, each "
             f"engine runs the stored inputs once; its outputs must agree with PyTorch's "
             f"(max abs error <= {s['tolerance']:g} x max |reference|) or it is FAILED and not "
             f"timed. Then per thread count, {s['rounds']} rounds interleave the engines "
             f"(A B C D A B C D ...); a round is one fresh process doing {s['warmup']} warm-up runs "
             f"(and more until {s.get('warmup_seconds', 0):g} s have passed) and "
             f"{s['runs']} timed runs. Latency = median of all {s['rounds'] * s['runs']} timed "
             "runs. % of peak = GFLOPs (grove's count) / latency / measured peak at that thread "
             "count. Karp-Flatt p_e = 1 - (1/psi - 1/N)/(1 - 1/N), psi = T1/TN, "
             f"N = {top}.\n",
             f"## Summary at {top} threads\n"]
    summary_table(results, top, lines)
    behind = []
    lines.append("![grove speedup](img/bench_speedup.png)\n")
    lines.append("![throughput vs threads](img/bench_throughput.png)\n")
    lines.append("## Per workload\n")
    for name, w in results["workloads"].items():
        workload_section(name, w, machine, threads_list, lines, behind)
    if "coexec" in results:
        coexec_section(results["coexec"], lines)
    if "tiles_sweep" in results:
        sweep_section(results["tiles_sweep"], lines)
    if "decode" in results:
        decode_section(results["decode"], lines)
    lines.append("## Where grove is behind\n")
    lines += behind or ["Nowhere in this run: grove is within 0.6x of the best peer everywhere."]
    if behind:
        # The analysis is written by people (traces, kernel tables), so it lives in its own
        # file beside the results and survives regenerating this page.
        why = os.path.join(os.path.dirname(os.path.abspath(json_path)), "benchmarks-why.md")
        if os.path.isfile(why):
            with open(why) as f:
                lines.append("\n" + f.read().strip())
        else:
            lines.append("\nWhy: not analysed yet (write `benchmarks-why.md` beside the results; "
                         "`grove bench --trace` and docs/kernels.md are the tools).")
    lines.append(f"\nRaw results: `{os.path.basename(json_path)}`.\n")
    return "\n".join(lines)


def plots(results, img_dir):
    import matplotlib
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    os.makedirs(img_dir, exist_ok=True)
    threads_list = results["settings"]["threads"]
    top = str(threads_list[-1])
    names = list(results["workloads"])
    engines = [e for e in LABELS if any(e in w["median_ms"] for w in results["workloads"].values())]

    # Speedup of grove (aspen) over each other engine, per workload, at the top thread count.
    fig, ax = plt.subplots(figsize=(max(6, 1.2 * len(names)), 4))
    others = [e for e in engines if e != GROVE]
    width = 0.8 / max(1, len(others))
    for k, e in enumerate(others):
        ys = []
        for n in names:
            m = results["workloads"][n]["median_ms"]
            g, o = m.get(GROVE, {}).get(top), m.get(e, {}).get(top)
            ys.append(o / g if g and o else 0)
        ax.bar([i + (k - (len(others) - 1) / 2) * width for i in range(len(names))], ys, width,
               label=f"vs {LABELS[e]}")
    ax.set_yscale("log", base=2)  # a 20x outlier must not flatten the 0.6x-vs-1.6x bars
    ax.axhline(1, color="black", lw=0.8)
    ax.axhline(1 / TARGET_RATIO, color="gray", lw=0.8, ls="--", label="target (1/0.6)")
    ax.set_xticks(range(len(names)), names, rotation=30, ha="right")
    ax.set_ylabel(f"grove speedup at {top} threads")
    ax.legend(fontsize=8)
    fig.tight_layout()
    fig.savefig(os.path.join(img_dir, "bench_speedup.png"), dpi=110)
    plt.close(fig)

    # Throughput (inferences/s x batch) vs threads, one panel per workload.
    cols = min(4, len(names))
    rows = (len(names) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(3.2 * cols, 2.6 * rows), squeeze=False)
    for i, n in enumerate(names):
        ax = axes[i // cols][i % cols]
        w = results["workloads"][n]
        for e in engines:
            m = w["median_ms"].get(e, {})
            ts = [t for t in threads_list if str(t) in m]
            ax.plot(ts, [w["batch"] * 1e3 / m[str(t)] for t in ts], marker="o", label=LABELS[e])
        ax.set_title(n, fontsize=9)
        ax.set_xticks(threads_list)
        ax.set_xlabel("threads", fontsize=8)
        ax.set_ylabel("samples/s", fontsize=8)
    for j in range(len(names), rows * cols):
        axes[j // cols][j % cols].axis("off")
    axes[0][0].legend(fontsize=7)
    fig.tight_layout()
    fig.savefig(os.path.join(img_dir, "bench_throughput.png"), dpi=110)
    plt.close(fig)

    sweep = results.get("tiles_sweep")
    if sweep and any("aspen_ms" in r for r in sweep["rows"]):
        rows_ok = [r for r in sweep["rows"] if "aspen_ms" in r]
        ks = [r["tiles_per_op"] for r in rows_ok]
        fig, ax = plt.subplots(figsize=(5, 3.5))
        for key, label in [("aspen_ms", "aspen (no barriers)"), ("barrier_ms", "barrier")]:
            ax.plot(ks, [r["gflop"] / (r[key] / 1e3) for r in rows_ok], marker="o", label=label)
        ax.set_xscale("log", base=2)
        ax.set_xlabel("tiles per layer")
        ax.set_ylabel("GFLOP/s")
        ax.set_title(f"ConvStack, {sweep['threads']} threads")
        ax.legend()
        fig.tight_layout()
        fig.savefig(os.path.join(img_dir, "bench_tiles_sweep.png"), dpi=110)
        plt.close(fig)


def main() -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("results")
    p.add_argument("--out", default=os.path.join(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))), "docs", "benchmarks.md"))
    p.add_argument("--no-plots", action="store_true")
    a = p.parse_args()
    with open(a.results) as f:
        results = json.load(f)
    text = render(results, a.results)
    if not a.no_plots:
        plots(results, os.path.join(os.path.dirname(os.path.abspath(a.out)), "img"))
    with open(a.out, "w") as f:
        f.write(text)
    print(f"report: {a.out}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

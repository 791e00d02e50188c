#!/usr/bin/python3
"""Checks bench/report.py on a stored results sample (a real --models mobilenet_v2_b1,convstack
--threads 1,2 run): the numbers it derives and the files it writes. Run by ctest (bench_report).

  /usr/bin/python3 bench/test_report.py OUT_DIR
"""
import json
import os
import subprocess
import sys

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import report  # noqa: E402


def check(condition, message):
    if not condition:
        print(f"FAIL: {message}", file=sys.stderr)
        sys.exit(1)


def main() -> int:
    out_dir = sys.argv[1]
    sample = os.path.join(HERE, "testdata", "sample-results.json")
    # Karp-Flatt: perfect scaling -> 1, no scaling -> 0, on N = 2 and 4.
    check(abs(report.karp_flatt(10.0, 5.0, 2) - 1.0) < 1e-12, "p_e of perfect scaling")
    check(abs(report.karp_flatt(10.0, 10.0, 4)) < 1e-12, "p_e of no scaling")
    check(abs(report.karp_flatt(10.0, 4.0, 4) - 0.8) < 1e-12, "p_e of psi 2.5 on 4")
    check(report.karp_flatt(10.0, 5.0, 1) is None, "p_e needs N >= 2")

    with open(sample) as f:
        results = json.load(f)
    text = report.render(results, sample)
    w = results["workloads"]["convstack"]["median_ms"]
    grove, ort = w["grove-aspen"]["2"], w["ort"]["2"]
    check(f"| convstack | 38.67 | {grove:.2f} | ONNX Runtime 1.20.1 | {ort:.2f} | "
          f"{ort / grove:.2f}x |" in text, "summary row: grove vs the best peer")
    check("**convstack, 2 threads**: grove is behind ONNX Runtime 1.20.1" in text,
          "a line where grove is behind")
    check("Throughput gain from co-execution" in text and "| 64 | 4096 |" in text,
          "co-execution row and tiles sweep")

    # Broken agreement shows as FAILED, and the whole pipeline writes markdown and plots.
    results["workloads"]["mobilenet_v2_b1"]["agreement"]["ort"] = {"ok": False,
                                                                  "error": "logits: too far"}
    broken = os.path.join(out_dir, "results.json")
    os.makedirs(out_dir, exist_ok=True)
    with open(broken, "w") as f:
        json.dump(results, f)
    md = os.path.join(out_dir, "benchmarks.md")
    subprocess.run(["/usr/bin/python3", os.path.join(HERE, "report.py"), broken, "--out", md],
                   check=True)
    check("**FAILED**: logits: too far" in open(md).read(), "FAILED agreement in the table")
    for png in ["bench_speedup.png", "bench_throughput.png", "bench_tiles_sweep.png"]:
        path = os.path.join(out_dir, "img", png)
        check(os.path.getsize(path) > 1000, f"plot {png}")
    print("bench report: ok")
    return 0


if __name__ == "__main__":
    sys.exit(main())

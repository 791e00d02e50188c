#!/usr/bin/python3
"""docs/img/int8_speedup_zen5.png: int8 speedup over grove fp32 (median of vs_fp32 rounds)
against the int8 check's error (*_int8_check.json), per model and thread count.
Usage: plot.py DIR OUT.png"""
import json, re, statistics, sys, collections
d, out = sys.argv[1], sys.argv[2]
speed = collections.defaultdict(list)
for line in open(f"{d}/int8_vs_fp32.txt"):
    m = re.match(r"t=(\d) (\S+) fp32 \S+ int8 \S+ speedup (\S+)", line)
    if m: speed[(m.group(2), int(m.group(1)))].append(float(m.group(3)))
import matplotlib
matplotlib.use("Agg")
import matplotlib.pyplot as plt
fig, ax = plt.subplots(figsize=(6, 4))
for (model, t), v in sorted(speed.items()):
    check = json.load(open(f"{d}/{model}_int8_check.json"))["check"]
    s = statistics.median(v)
    ax.scatter(check["max_error"], s, marker="o" if t == 2 else "s", s=60)
    ax.annotate(f"{model} {t}T ({s:.2f}x)", (check["max_error"], s), textcoords="offset points",
                xytext=(8, -12 if t == 2 else 6), fontsize=8)
    print(model, t, "speedup", s, "max_error", check["max_error"], "top1", check["top1_agreement"])
ax.set_xlabel("max |int8 - fp32| / max |fp32| of the outputs")
ax.set_ylabel("int8 speedup over grove fp32 (p50)")
ax.set_title("int8 (grove quantize, QDQ) on Zen 5: speed against accuracy")
ax.grid(True, alpha=0.3)
fig.tight_layout()
fig.savefig(out, dpi=110)

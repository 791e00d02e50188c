#!/usr/bin/python3
"""Medians over rounds of compare.sh's lines ("t=T engine name ms"), and the ratios the
docs quote. Usage: summarize.py results.txt"""
import collections
import statistics
import sys

runs = collections.defaultdict(list)
for line in open(sys.argv[1]):
    parts = line.split()
    if len(parts) == 4 and parts[3]:
        runs[(parts[0], parts[1] + " " + parts[2])].append(float(parts[3]))
med = {k: statistics.median(v) for k, v in runs.items()}
for t in sorted({k[0] for k in med}, reverse=True):
    print(f"\n{t}")
    for k in sorted(k for k in med if k[0] == t):
        print(f"  {k[1]:28s} {med[k]:8.2f} ms  ({', '.join(f'{x:.1f}' for x in runs[k])})")
    g = lambda n: med.get((t, n), float("nan"))
    for model in ("resnet50", "bert"):
        print(f"  {model}: int8 AMX / ORT int8 {g('grove ' + model + '_int8_amx') / g('ort ' + model + '_int8'):.2f}, "
              f"AMX over VNNI {g('grove ' + model + '_int8_vnni') / g('grove ' + model + '_int8_amx'):.2f}x, "
              f"int8 AMX over grove fp32 {g('grove ' + model + '_fp32') / g('grove ' + model + '_int8_amx'):.2f}x")

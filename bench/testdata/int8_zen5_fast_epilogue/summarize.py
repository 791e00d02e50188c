#!/usr/bin/python3
"""Per model and thread count: median p50 of each engine and the median of the rounds'
grove/ORT ratios (each round's two lines were measured back to back). Usage: summarize.py FILE..."""
import collections, statistics, sys
rows = collections.defaultdict(list)
for f in sys.argv[1:]:
    for line in open(f):
        p = line.split()
        if len(p) == 4 and p[0].startswith('t='):
            rows[(p[0], p[2])].append((p[1], float(p[3])))
for (t, model), v in sorted(rows.items()):
    g = [x for e, x in v if e == 'grove']; o = [x for e, x in v if e == 'ort']
    ratios = [a / b for a, b in zip(g, o)]
    print('%s %-14s grove %6.2f ms  ort %6.2f ms  grove/ort median %.3f  rounds %s' % (
        t, model, statistics.median(g), statistics.median(o), statistics.median(ratios), ' '.join('%.2f' % r for r in ratios)))

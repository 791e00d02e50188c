# Median over rounds of grove / ONNX Runtime per-round medians: ratios.py RESULTS.json [RUNS_PER_ROUND]
import json,sys,statistics
d=json.load(open(sys.argv[1])); runs=int(sys.argv[2]) if len(sys.argv)>2 else 5
for name,w in d['workloads'].items():
    out=[]
    for t in ('1','2'):
        g=w['ms']['grove-aspen'].get(t); o=w['ms']['ort'].get(t)
        if not g: continue
        rr=[statistics.median(g[i:i+runs])/statistics.median(o[i:i+runs]) for i in range(0,len(g),runs)]
        out.append(f"{t}T {statistics.median(rr):.3f} (g {w['median_ms']['grove-aspen'][t]:.2f} ort {w['median_ms']['ort'][t]:.2f})")
    print(name, ' | '.join(out))

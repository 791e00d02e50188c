#!/bin/bash
# Per node, grove against ONNX Runtime on the same machine, for a session lent the device machine
# (python3, torch, onnxruntime there; no Debian packages). Prepare here first:
#   bench/device-scaling.sh --prepare; cp ~/.cache/grove/bench/squeezenet_b1.{onnx,json} \
#     ~/.cache/grove/bench/squeezenet_b1.in.*.npy .devrun/models/
# then on the device, with .devrun carried:  bash bench/device-profile.sh
# $OUT gets log.txt, ort_MODEL.json (ORT's profiler: median kernel time per node, 1 thread),
# grove_MODEL.N.json (N traced grove runs, 1 thread; tiles per node summed by the reader) and
# threads.json (latency at 1..16 threads, ORT and grove alternating), and with
# .devrun/grove_base present (an earlier build, copied there), base.txt: the earlier build
# against this one at 1..16 threads, 3 alternating rounds of p50s.
set -u
OUT=${OUT:-/tmp/device-out}; mkdir -p "$OUT"
export LD_LIBRARY_PATH=$PWD/.devrun/lib PYTHONUNBUFFERED=1
PY=${PY:-python3} G=$PWD/.devrun/grove M=/tmp/grove-models T=/tmp/grove-traces
exec > >(tee "$OUT/log.txt") 2>&1
lscpu | head -20; nproc; date
mkdir -p $M $T && cp .devrun/models/* $M/
timeout 150 $PY bench/models/export_bench_models.py --out $M --only ${EXPORT:-resnet50_b1,googlenet_b1} > /dev/null 2>&1; echo "export rc $?"
ls $M
inputs() { for f in $M/$1.in.*.npy; do b=${f##*/}; b=${b#$1.in.}; echo --input ${b%.npy}=$f; done; }
MODELS=${MODELS:-squeezenet_b1 mobilenet_v2_b1 googlenet_b1 resnet50_b1}
for m in $MODELS; do
  [ -f $M/$m.onnx ] || continue
  timeout 60 $PY bench/ort_node_times.py $M/$m.onnx --threads 1 --runs 20 --out $T/ort_$m.json
  # One traced run per process; the per-node summary keeps 3 of them, as the ORT side keeps medians.
  for r in 1 2 3; do
    timeout 60 $G bench $M/$m.onnx $(inputs $m) --threads 1 --runs 10 --trace $T/$m.$r.json 2>&1 | tail -1
  done
  $PY - "$m" $T <<'PY'
import json, sys, collections, statistics
m, t = sys.argv[1], sys.argv[2]
runs = []
for r in (1, 2, 3):
    per = collections.Counter()
    for e in json.load(open(f"{t}/{m}.{r}.json"))["traceEvents"]:
        if e.get("ph") == "X":
            per[e["name"].rsplit(" #", 1)[0]] += e["dur"]
    runs.append(per)
nodes = {n: statistics.median(r.get(n, 0) for r in runs) for n in set().union(*runs)}
json.dump({"model": m, "nodes": nodes}, open(f"{t}/grove_{m}.json", "w"), indent=1)
PY
done
tar czf $OUT/nodes.tgz -C $T $(cd $T && ls ort_*.json grove_*.json)
timeout ${THREADS_TIMEOUT:-200} $PY bench/threads_vs_ort.py --grove $G --models $M --only $(echo $MODELS | tr ' ' ,) \
  --threads 1,2,4,8,16 --runs 15 --rounds 2 --out $OUT/threads.json
if [ -x .devrun/grove_base ]; then
  p50() { $PY -c "import json,sys; print('%.3f' % json.load(sys.stdin)['results'][0]['p50_ms'])"; }
  for m in $MODELS; do
    for t in 1 2 4 8 16; do
      for r in 1 2 3; do
        b=$(timeout 60 .devrun/grove_base bench $M/$m.onnx $(inputs $m) --threads $t --runs 15 --warmup 3 --json 2>/dev/null | p50)
        n=$(timeout 60 $G bench $M/$m.onnx $(inputs $m) --threads $t --runs 15 --warmup 3 --json 2>/dev/null | p50)
        echo "$m t$t r$r base $b new $n"
      done
    done
  done | tee $OUT/base.txt
fi
date

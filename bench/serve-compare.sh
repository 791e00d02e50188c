#!/usr/bin/env bash
# Serving two models side by side, measured with `grove load` (docs/serving.md):
#   shared   one grove serve with both models on one engine (every request in one ready pool)
#   procs    one grove serve per model, each with an engine of all the cores
#   split    one grove serve per model, each pinned to its own share of the cores (taskset)
# Each round starts the servers, sends N requests to each model from C clients per model at
# once, and reports both models' throughput and latency; rounds alternate the layouts.
#   bench/serve-compare.sh MODEL_A MODEL_B [ROUNDS] [REQUESTS] [CLIENTS] [--binary|--json]
set -euo pipefail
a=${1:?usage: serve-compare.sh MODEL_A MODEL_B [ROUNDS] [REQUESTS] [CLIENTS] [--binary]}
b=${2:?}
rounds=${3:-3}
n=${4:-300}
c=${5:-4}
format=${6:---binary}
[ "$format" = "--json" ] && format=""
grove=${GROVE:-$(dirname "$0")/../build/grove}
cores=$(nproc)
out=$(mktemp -d)
trap '[ -f "$out/pids" ] && kill $(cat "$out/pids") 2>/dev/null; rm -rf "$out"' EXIT

start() {  # start LOGFILE ARGS... -> prints the port (its pid goes to $out/pids)
  local log=$1; shift
  "$@" --port 0 > "$log" 2>&1 &
  echo $! >> "$out/pids"
  for _ in $(seq 100); do
    grep -q "listening on" "$log" 2>/dev/null && break
    sleep 0.1
  done
  grep -o "127.0.0.1:[0-9]*" "$log" | head -1 | cut -d: -f2
}

load_both() {  # load_both PORT_A PORT_B LABEL
  "$grove" load "http://127.0.0.1:$1" --model a -c "$c" -n "$n" $format --json > "$out/a.json" &
  local pa=$!
  "$grove" load "http://127.0.0.1:$2" --model b -c "$c" -n "$n" $format --json > "$out/b.json" &
  local pb=$!
  wait $pa $pb
  python3 - "$3" "$out/a.json" "$out/b.json" <<'PY'
import json, sys
label, *files = sys.argv[1:]
rs = [json.load(open(f)) for f in files]
seconds = max(r["seconds"] for r in rs)
total = sum(r["ok"] for r in rs)
errors = sum(r["errors"] + r["mismatches"] for r in rs)
print("%-7s %8.1f req/s  a: p50 %6.2f p99 %6.2f ms   b: p50 %6.2f p99 %6.2f ms  errors %d" % (
    label, total / seconds, rs[0]["p50_ms"], rs[0]["p99_ms"], rs[1]["p50_ms"], rs[1]["p99_ms"], errors))
PY
}

stop_all() {
  [ -f "$out/pids" ] && kill -TERM $(cat "$out/pids") 2>/dev/null || true
  wait 2>/dev/null || true
  rm -f "$out/pids"
}

echo "models: a=$a b=$b; $n requests per model, $c clients per model, ${format:-JSON} tensors, $cores cores"
lscpu | grep "Model name" | sed 's/  */ /g'
half=$((cores / 2 > 0 ? cores / 2 : 1))
for r in $(seq "$rounds"); do
  p=$(start "$out/shared.log" "$grove" serve --model a="$a" --model b="$b")
  load_both "$p" "$p" shared
  stop_all
  pa=$(start "$out/pa.log" "$grove" serve --model a="$a")
  pb=$(start "$out/pb.log" "$grove" serve --model b="$b")
  load_both "$pa" "$pb" procs
  stop_all
  if [ "$cores" -ge 2 ]; then
    pa=$(start "$out/sa.log" taskset -c 0-$((half - 1)) "$grove" serve --threads "$half" --model a="$a")
    pb=$(start "$out/sb.log" taskset -c "$half"-$((cores - 1)) "$grove" serve --threads $((cores - half)) --model b="$b")
    load_both "$pa" "$pb" split
    stop_all
  fi
done

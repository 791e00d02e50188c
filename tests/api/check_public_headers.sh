#!/usr/bin/env bash
# The public API names nothing of the library's insides (docs/api.md):
#  1. every include/grove/*.h compiles on its own with only include/ on the include path, so
#     none reaches into src/ (an #include "graph/graph.h" fails here);
#  2. no public header mentions an internal type or switch: the IR (Graph), the planner's
#     output (Plan), the engine's job interface (Job, DagView), the machine measurements
#     (MachineProbes), the test switches (poison_buffers, slow_worker) or the accessors that
#     moved to src/runtime (plan_for, imported(), graph(), probes()). The library reaches
#     those through runtime/model.h, runtime/session.h and runtime/engine.h.
# Quicker than api_install_example (no install, no example build), so it runs with the unit
# tests too.
#   check_public_headers.sh SOURCE_DIR [CXX]
set -euo pipefail
src=$1
cxx=${2:-c++}
status=0
for h in "$src"/include/grove/*.h; do
  name=grove/$(basename "$h")
  if ! echo "#include <$name>" | "$cxx" -std=c++20 -fsyntax-only -x c++ -I"$src/include" -; then
    echo "FAIL: $name does not compile with only include/ on the include path"
    status=1
  fi
done
# Whole words, case-sensitive: "graph", "plan" and "job" as ordinary words in comments are fine.
if grep -nwE 'Graph|Plan|Job|DagView|MachineProbes' "$src"/include/grove/*.h; then
  echo "FAIL: a public header names an internal type (above)"
  status=1
fi
if grep -nE 'poison_buffers|slow_worker|plan_for|\bimported\(\)|\bgraph\(\)|\bprobes\(\)' "$src"/include/grove/*.h; then
  echo "FAIL: a public header names an internal accessor or test switch (above)"
  status=1
fi
if [ "$status" = 0 ]; then echo "PASS: include/grove compiles alone and names no internals"; fi
exit "$status"

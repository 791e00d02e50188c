#!/usr/bin/env bash
# The library's layers include only downward (docs/architecture.md). Each folder of src/ may
# include the public headers (grove/) and the folders listed for it; anything else is an
# upward or sideways include and fails the build, naming the file and line.
#   check-layers.sh SOURCE_DIR
set -euo pipefail
cd "${1:-$(dirname "$0")/..}/src"
declare -A allowed=(
  [kernels]="kernels"
  [graph]="graph"
  [npy]="graph npy"
  [ops]="graph kernels ops"
  [passes]="graph kernels ops passes"
  [onnx]="graph ops passes onnx"
  [plan]="graph kernels ops passes plan"
  [tune]="graph kernels ops passes plan tune"
  [runtime]="graph kernels ops passes onnx plan tune runtime"
  [quantize]="graph kernels ops passes onnx plan tune runtime quantize"
  [sim]="graph kernels ops passes onnx plan tune runtime sim"
  [dynamic]="graph kernels ops passes onnx plan tune runtime dynamic"
  [serve]="graph kernels ops passes onnx plan tune runtime dynamic serve"
  [cli]="graph kernels ops passes onnx plan tune runtime serve npy quantize sim dynamic cli"
)
status=0
for layer in */; do
  layer=${layer%/}
  if [ -z "${allowed[$layer]+x}" ]; then
    echo "check-layers: src/$layer is not in the layer list of scripts/check-layers.sh" >&2
    status=1
    continue
  fi
  while IFS=: read -r file line text; do
    dep=$(sed -E 's/.*#include "([a-z_]+)\/.*/\1/' <<<"$text")
    [ "$dep" = grove ] && continue
    case " ${allowed[$layer]} " in
      *" $dep "*) ;;
      *) echo "src/$file:$line: $layer may not include $dep/ (layers include only downward; docs/architecture.md)" >&2
         status=1 ;;
    esac
  done < <(grep -Hn '^#include "[a-z_]*/' "$layer"/* || true)
done
exit $status

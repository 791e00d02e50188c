#!/usr/bin/env bash
# Makes `import grove` work for Debian's python3 without PyPI: writes grove.pth (one line, the
# module's folder) into the system site-packages. Without root it prints the PYTHONPATH line
# to use instead.   python-path.sh [BUILD_DIR]   (default: build)
set -euo pipefail
cd "$(dirname "$0")/.."
dir="$(pwd)/${1:-build}/python"
if ! ls "$dir"/grove*.so >/dev/null 2>&1; then
  echo "python-path: no Python module in $dir (needs pybind11-dev, python3-dev, python3-numpy)" >&2
  exit 1
fi
site=$(/usr/bin/python3 -c "import site; print(site.getsitepackages()[0])")
if mkdir -p "$site" 2>/dev/null && echo "$dir" > "$site/grove.pth" 2>/dev/null; then
  echo "python-path: import grove now works for /usr/bin/python3 ($site/grove.pth -> $dir)"
else
  echo "python-path: $site is not writable; use: export PYTHONPATH=$dir"
fi

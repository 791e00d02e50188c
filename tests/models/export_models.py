#!/usr/bin/python3
"""Exports the model-test zoo to ONNX with random weights, plus PyTorch's reference outputs.

Run with Debian's Python (/usr/bin/python3: torch 1.13, torchvision 0.14, onnx 1.12).
Everything goes into a cache directory outside git, one folder per model:

    <cache>/<model>/model.onnx
    <cache>/<model>/<case>/input_<name>.npy, output_<name>.npy
    <cache>/<model>/manifest.json     (written last; its presence marks the export complete)

Only models whose manifest is missing or stale (older EXPORT_VERSION) are regenerated, so a
second run costs only the torch import. Weights and inputs come from fixed seeds, so a
regenerated model is the same model.
"""
import argparse
import json
import os
import sys
import time
import warnings
from pathlib import Path

from model_defs import (build_bert2, build_fpn_seg, build_gpt2, build_mobilenet_v2,
                        build_regnet_x_400mf, build_resnet18, build_yolo_head)

# Bump when any model, input or export setting changes so stale caches are rebuilt.
EXPORT_VERSION = 1


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "grove" / "models"


# ---------------------------------------------------------------------------------------------
# The zoo. Each case is one set of inputs run through the exported model; dynamic-axes models
# get several so grove binds the same file to different shapes.


def _image(rng, shape):
    return rng.standard_normal(shape).astype("float32")


def _token_case(rng, batch, seq, vocab=1000, with_mask=True, padded_rows=0):
    ids = rng.integers(0, vocab, size=(batch, seq), dtype="int64")
    inputs = {"input_ids": ids}
    if with_mask:
        mask = ids * 0 + 1
        for row in range(min(padded_rows, batch)):
            mask[batch - 1 - row, seq - 5 * (row + 1):] = 0  # right padding, as tokenizers do
        inputs["attention_mask"] = mask
    return inputs


def zoo():
    """name -> spec. `cases` are functions of a numpy Generator returning {input: array}."""
    return {
        "resnet18": dict(
            build=build_resnet18, opset=13, inputs=["input"], outputs=["logits"],
            cases={"b1_224": lambda rng: {"input": _image(rng, (1, 3, 224, 224))}}),
        "mobilenet_v2": dict(
            build=build_mobilenet_v2, opset=13, inputs=["input"], outputs=["logits"],
            cases={"b1_224": lambda rng: {"input": _image(rng, (1, 3, 224, 224))}}),
        "regnet_x_400mf": dict(
            build=build_regnet_x_400mf, opset=13, inputs=["input"], outputs=["logits"],
            cases={"b1_160": lambda rng: {"input": _image(rng, (1, 3, 160, 160))}}),
        "bert2": dict(
            build=build_bert2, opset=14, inputs=["input_ids", "attention_mask"],
            outputs=["last_hidden_state"],
            dynamic_axes={"input_ids": {0: "batch", 1: "seq"},
                          "attention_mask": {0: "batch", 1: "seq"},
                          "last_hidden_state": {0: "batch", 1: "seq"}},
            cases={"b1_s16": lambda rng: _token_case(rng, 1, 16),
                   "b2_s33": lambda rng: _token_case(rng, 2, 33, padded_rows=1)}),
        "gpt2": dict(
            build=build_gpt2, opset=14, inputs=["input_ids"], outputs=["logits"],
            dynamic_axes={"input_ids": {0: "batch", 1: "seq"},
                          "logits": {0: "batch", 1: "seq"}},
            cases={"b1_s16": lambda rng: _token_case(rng, 1, 16, with_mask=False),
                   "b2_s33": lambda rng: _token_case(rng, 2, 33, with_mask=False)}),
        "yolo_head": dict(
            build=build_yolo_head, opset=13, inputs=["image"], keep_batchnorm=True,
            outputs=["pred_coarse", "pred_fine"],
            cases={"b1_64": lambda rng: {"image": _image(rng, (1, 3, 64, 64))}}),
        "fpn_seg": dict(
            build=build_fpn_seg, opset=13, inputs=["image"], outputs=["mask_logits"],
            keep_batchnorm=True,
            cases={"b1_64": lambda rng: {"image": _image(rng, (1, 3, 64, 64))}}),
    }


def manifest_path(cache: Path, name: str) -> Path:
    return cache / name / "manifest.json"


def load_manifest(cache: Path, name: str):
    """The model's manifest when its export is complete and current, else None."""
    try:
        manifest = json.loads(manifest_path(cache, name).read_text())
    except (OSError, ValueError):
        return None
    if manifest.get("version") != EXPORT_VERSION:
        return None
    folder = cache / name
    files = [manifest["model"]]
    for case in manifest["cases"].values():
        files += list(case["inputs"].values()) + list(case["outputs"].values())
    return manifest if all((folder / f).is_file() for f in files) else None


def export_one(torch, np, cache: Path, name: str, spec) -> None:
    folder = cache / name
    folder.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(1000 + sum(map(ord, name)))
    model = spec["build"](torch).eval()

    cases = {}
    export_inputs = None
    for case_index, (case_name, make_inputs) in enumerate(spec["cases"].items()):
        rng = np.random.default_rng(100 * case_index + 7)
        arrays = make_inputs(rng)
        tensors = [torch.from_numpy(arrays[n]) for n in spec["inputs"]]
        with torch.no_grad():
            outputs = model(*tensors)
        if not isinstance(outputs, (tuple, list)):
            outputs = (outputs,)
        case_dir = folder / case_name
        case_dir.mkdir(exist_ok=True)
        record = {"inputs": {}, "outputs": {}}
        for input_name in spec["inputs"]:
            rel = f"{case_name}/input_{input_name}.npy"
            np.save(folder / rel, arrays[input_name])
            record["inputs"][input_name] = rel
        for output_name, value in zip(spec["outputs"], outputs):
            rel = f"{case_name}/output_{output_name}.npy"
            np.save(folder / rel, value.numpy())
            record["outputs"][output_name] = rel
        cases[case_name] = record
        # Trace with the last (largest) case: tracing with batch 1 can let the exporter
        # specialise on a size-1 dimension.
        export_inputs = tuple(tensors)

    onnx_path = folder / "model.onnx"
    # In EVAL mode the exporter folds BatchNorm into the preceding Conv; PRESERVE (on a model
    # in eval mode) keeps BatchNormalization nodes so grove's own folding gets exercised.
    mode = torch.onnx.TrainingMode.PRESERVE if spec.get("keep_batchnorm") else \
        torch.onnx.TrainingMode.EVAL
    torch.onnx.export(
        model, export_inputs, str(onnx_path), opset_version=spec["opset"],
        input_names=spec["inputs"], output_names=spec["outputs"],
        dynamic_axes=spec.get("dynamic_axes"), do_constant_folding=True, training=mode)

    manifest = {"version": EXPORT_VERSION, "model": "model.onnx", "opset": spec["opset"],
                "dynamic": bool(spec.get("dynamic_axes")), "cases": cases}
    manifest_path(cache, name).write_text(json.dumps(manifest, indent=1) + "\n")


def ensure_exported(cache: Path, names=None, log=print) -> dict:
    """Exports every missing or stale model; returns name -> manifest for the ones asked."""
    specs = zoo()
    names = list(specs) if names is None else names
    unknown = [n for n in names if n not in specs]
    if unknown:
        raise SystemExit(f"unknown model(s): {', '.join(unknown)}; known: {', '.join(specs)}")
    missing = [n for n in names if load_manifest(cache, n) is None]
    if missing:
        import numpy as np
        import torch
        torch.set_num_threads(max(1, min(2, os.cpu_count() or 1)))
        for name in missing:
            start = time.monotonic()
            with warnings.catch_warnings():
                # The exporter's tracer/shape-inference chatter says nothing about our models.
                warnings.simplefilter("ignore")
                export_one(torch, np, cache, name, specs[name])
            if load_manifest(cache, name) is None:
                raise SystemExit(f"export of {name} did not produce a complete manifest")
            log(f"exported {name:<13} opset {specs[name]['opset']}  "
                f"{time.monotonic() - start:6.1f}s  -> {cache / name}")
    for name in names:
        if name not in missing:
            log(f"cached   {name:<13} {cache / name}")
    return {n: load_manifest(cache, n) for n in names}


def main(argv=None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("cache", nargs="?", type=Path, default=default_cache_dir(),
                        help="output directory (default: %(default)s)")
    parser.add_argument("--models", nargs="*", help="only these models (default: all)")
    parser.add_argument("--force", action="store_true", help="re-export even when cached")
    args = parser.parse_args(argv)
    if args.force:
        for name in args.models or zoo():
            manifest_path(args.cache, name).unlink(missing_ok=True)
    ensure_exported(args.cache, args.models)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Exports grove's benchmark workloads (bench_defs.py) to ONNX with random weights, plus one
fixed input set and PyTorch's outputs for it, into a cache directory outside the repository.

  /usr/bin/python3 bench/models/export_bench_models.py                # every missing model
  /usr/bin/python3 bench/models/export_bench_models.py --only convstack,resnet50_b1
  /usr/bin/python3 bench/models/export_bench_models.py --list
  options: --out DIR (default $XDG_CACHE_HOME/grove/bench or ~/.cache/grove/bench),
           --force (re-export models already present), --opset N (override every model's)

Per model NAME it writes:
  NAME.onnx                static shapes; BatchNormalization kept (not folded by the exporter)
  NAME.in.<input>.npy      the input tensors, in graph-input order (see NAME.json)
  NAME.out.<output>.npy    PyTorch's outputs for those inputs (output-agreement reference)
  NAME.pt                  TorchScript of the same model (torch.jit.trace + torch.jit.freeze)
                           for the benchmark suite's TorchScript runner; when only it is
                           missing it is rebuilt from the seed (the ONNX file stays) and its
                           outputs are checked against the stored NAME.out.*.npy
  NAME.json                manifest, written last: a model counts as present only when its
                           manifest and every file it lists exist
Each model is exported in its own child process so that its memory is returned to the system
before the next one starts (BERT-large needs a few GiB while exporting).
"""
import argparse
import inspect
import json
import os
import resource
import subprocess
import sys
import time
import warnings

HERE = os.path.dirname(os.path.abspath(__file__))
sys.dont_write_bytecode = True  # importing bench_defs must not leave __pycache__ in the repo


def default_cache_dir() -> str:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return os.path.join(base, "grove", "bench")


def manifest_path(out_dir: str, name: str) -> str:
    return os.path.join(out_dir, f"{name}.json")


def read_manifest_if_complete(out_dir: str, name: str):
    """The manifest when the ONNX model and its .npy files are all there (NAME.pt aside)."""
    try:
        with open(manifest_path(out_dir, name)) as f:
            manifest = json.load(f)
    except (OSError, ValueError):
        return None
    files = [manifest["onnx"]] + [t["file"] for t in manifest["inputs"] + manifest["outputs"]]
    if all(os.path.isfile(os.path.join(out_dir, f)) for f in files):
        return manifest
    return None


# ---- child: export one model --------------------------------------------------------------

def replace_file(tmp_path: str, final_path: str):
    os.replace(tmp_path, final_path)


def save_npy(out_dir: str, file_name: str, array) -> None:
    import numpy as np
    tmp = os.path.join(out_dir, file_name + ".partial")
    with open(tmp, "wb") as f:
        np.save(f, array)
    replace_file(tmp, os.path.join(out_dir, file_name))


def build_seeded(name: str):
    """The workload's model and inputs, the same on every call: weights come from the family
    seed, inputs from the model name's seed."""
    import torch
    sys.path.insert(0, HERE)
    import bench_defs
    workload = bench_defs.WORKLOADS[name]
    seed = bench_defs.family_seed(workload.family)
    torch.manual_seed(seed)  # torchvision's and ConvStack's initialisers use the global generator
    model = workload.build(torch.Generator().manual_seed(seed))
    model.eval()
    inputs = workload.make_inputs(torch.Generator().manual_seed(bench_defs.family_seed(name)))
    return workload, seed, model, inputs


def save_torchscript(name: str, out_dir: str, model, inputs, references) -> None:
    """Traces and freezes `model` (BN folded, weights as constants: TorchScript's inference
    form), checks it reproduces PyTorch's outputs `references` (numpy arrays), saves NAME.pt."""
    import numpy as np
    import torch
    with torch.no_grad():
        traced = torch.jit.freeze(torch.jit.trace(model, tuple(inputs.values())).eval())
        got = traced(*inputs.values())
    if isinstance(got, torch.Tensor):
        got = (got,)
    for i, (tensor, ref) in enumerate(zip(got, references)):
        err = float(np.abs(tensor.numpy().astype(np.float32) - ref).max())
        if not err <= 1e-4 * float(np.abs(ref).max()):
            raise RuntimeError(f"{name}: TorchScript output {i} differs from PyTorch's by {err} "
                               "(weights not reproducible from the seed?)")
    tmp = os.path.join(out_dir, f"{name}.pt.partial")
    traced.save(tmp)
    replace_file(tmp, os.path.join(out_dir, f"{name}.pt"))


def export_torchscript_only(name: str, out_dir: str) -> None:
    """NAME.pt for a model whose ONNX export is present: the model is rebuilt from its seed,
    and the stored outputs prove the rebuilt weights are the exported ones."""
    import numpy as np
    warnings.filterwarnings("ignore")
    _, _, model, inputs = build_seeded(name)
    with open(manifest_path(out_dir, name)) as f:
        outputs = json.load(f)["outputs"]
    references = [np.load(os.path.join(out_dir, o["file"])) for o in outputs]
    save_torchscript(name, out_dir, model, inputs, references)


def export_one(name: str, out_dir: str, opset_override) -> None:
    warnings.filterwarnings("ignore")  # TracerWarnings about static sizes are expected here
    import numpy as np
    import onnx
    import torch

    timings = {}
    start = time.perf_counter()
    workload, seed, model, inputs = build_seeded(name)
    opset = opset_override or workload.opset
    params = sum(p.numel() for p in model.parameters())
    timings["build_s"] = time.perf_counter() - start

    t = time.perf_counter()
    with torch.no_grad():
        outputs = model(*inputs.values())
    if isinstance(outputs, torch.Tensor):
        outputs = (outputs,)
    if len(outputs) != len(workload.output_names):
        raise RuntimeError(f"{name}: model returned {len(outputs)} outputs, "
                           f"expected {len(workload.output_names)}")
    timings["torch_forward_s"] = time.perf_counter() - t

    t = time.perf_counter()
    onnx_file = f"{name}.onnx"
    tmp_onnx = os.path.join(out_dir, onnx_file + ".partial")
    with torch.no_grad():
        # PRESERVE on an eval-mode model exports inference-mode BatchNormalization nodes
        # without the exporter's Conv+BN fusion: folding is grove's job, and the peers'.
        # Constant folding stays on: it turns weight transposes and the causal mask into
        # initializers, as a typical production export does.
        # torch >= 2.9 exports through dynamo by default; these models are made for the
        # TorchScript exporter (PRESERVE, the opset asked for), which older torch has alone.
        legacy = {"dynamo": False} if "dynamo" in inspect.signature(torch.onnx.export).parameters else {}
        torch.onnx.export(model, tuple(inputs.values()), tmp_onnx, opset_version=opset,
                          input_names=list(inputs.keys()),
                          output_names=list(workload.output_names),
                          training=torch.onnx.TrainingMode.PRESERVE, do_constant_folding=True, **legacy)
    timings["onnx_export_s"] = time.perf_counter() - t

    t = time.perf_counter()
    proto = onnx.load(tmp_onnx)
    proto.graph.name = f"grove_bench_{name}"
    proto.producer_name = "grove bench/models/export_bench_models.py"
    proto.doc_string = f"{workload.description}; random weights, seed {seed}"
    onnx.checker.check_model(proto)
    check_static_signature(proto, inputs, workload.output_names, outputs)
    op_counts = {}
    for node in proto.graph.node:
        op_counts[node.op_type] = op_counts.get(node.op_type, 0) + 1
    onnx.save(proto, tmp_onnx)
    del proto
    timings["check_s"] = time.perf_counter() - t

    input_records = []
    for input_name, tensor in inputs.items():
        file_name = f"{name}.in.{input_name}.npy"
        save_npy(out_dir, file_name, tensor.numpy())
        input_records.append({"name": input_name, "file": file_name, "shape": list(tensor.shape),
                              "dtype": str(tensor.numpy().dtype)})
    output_records = []
    for output_name, tensor in zip(workload.output_names, outputs):
        array = tensor.numpy().astype(np.float32)
        file_name = f"{name}.out.{output_name}.npy"
        save_npy(out_dir, file_name, array)
        output_records.append({"name": output_name, "file": file_name, "shape": list(array.shape),
                               "dtype": "float32", "max_abs": float(np.abs(array).max()),
                               "finite": bool(np.isfinite(array).all())})
    replace_file(tmp_onnx, os.path.join(out_dir, onnx_file))
    t = time.perf_counter()
    save_torchscript(name, out_dir, model, inputs, [t.numpy() for t in outputs])
    del model
    timings["torchscript_s"] = time.perf_counter() - t
    timings["total_s"] = time.perf_counter() - start

    manifest = {
        "name": name, "family": workload.family, "description": workload.description,
        "onnx": onnx_file, "onnx_bytes": os.path.getsize(os.path.join(out_dir, onnx_file)),
        "opset": opset, "seed": seed, "parameters": params,
        "inputs": input_records, "outputs": output_records, "op_counts": op_counts,
        "exporter": {"torch": torch.__version__, "onnx": onnx.__version__},
        "timings": {k: round(v, 3) for k, v in timings.items()},
        "peak_rss_bytes": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss * 1024,
    }
    tmp = manifest_path(out_dir, name) + ".partial"
    with open(tmp, "w") as f:
        json.dump(manifest, f, indent=1)
    replace_file(tmp, manifest_path(out_dir, name))


def check_static_signature(proto, inputs, output_names, outputs) -> None:
    """The benchmark needs exactly these graph inputs/outputs with fully static shapes."""
    def dims(value_info):
        return [d.dim_value if d.HasField("dim_value") else None
                for d in value_info.type.tensor_type.shape.dim]
    got_inputs = [(v.name, dims(v)) for v in proto.graph.input]
    want_inputs = [(k, list(t.shape)) for k, t in inputs.items()]
    got_outputs = [(v.name, dims(v)) for v in proto.graph.output]
    want_outputs = [(k, list(t.shape)) for k, t in zip(output_names, outputs)]
    if got_inputs != want_inputs or got_outputs != want_outputs:
        raise RuntimeError(f"exported signature mismatch:\n inputs {got_inputs} != {want_inputs}"
                           f"\n outputs {got_outputs} != {want_outputs}")


# ---- parent: select, skip, run children, report --------------------------------------------

def workload_table():
    sys.path.insert(0, HERE)
    import bench_defs  # imports torch: only the parent's --list and name validation need it
    return bench_defs.WORKLOADS


def describe(manifest) -> str:
    t = manifest["timings"]
    return (f"{manifest['onnx_bytes'] / 2**20:8.1f} MiB  {t['total_s']:6.1f} s "
            f"(build {t['build_s']:.1f}, torch {t['torch_forward_s']:.1f}, "
            f"export {t['onnx_export_s']:.1f}, check+save {t['check_s']:.1f})  "
            f"peak RSS {manifest['peak_rss_bytes'] / 2**30:.1f} GiB  opset {manifest['opset']}  "
            f"{sum(manifest['op_counts'].values())} nodes")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--out", default=default_cache_dir(), help="cache directory")
    parser.add_argument("--only", help="comma-separated model names")
    parser.add_argument("--list", action="store_true", help="list models and whether present")
    parser.add_argument("--force", action="store_true", help="re-export models already present")
    parser.add_argument("--opset", type=int, help="export every model at this opset")
    parser.add_argument("--worker", help=argparse.SUPPRESS)  # internal: export one model
    parser.add_argument("--torchscript-worker", help=argparse.SUPPRESS)  # internal: NAME.pt only
    args = parser.parse_args()

    if args.worker:
        export_one(args.worker, args.out, args.opset)
        return 0
    if args.torchscript_worker:
        export_torchscript_only(args.torchscript_worker, args.out)
        return 0

    workloads = workload_table()
    names = list(workloads)
    if args.only:
        names = [n.strip() for n in args.only.split(",") if n.strip()]
        unknown = [n for n in names if n not in workloads]
        if unknown:
            print(f"unknown model(s): {', '.join(unknown)}; known: {', '.join(workloads)}",
                  file=sys.stderr)
            return 2

    if args.list:
        for name in names:
            w = workloads[name]
            present = "present" if read_manifest_if_complete(args.out, name) else "missing"
            print(f"{name:20s} {present:8s} opset {w.opset}  {w.description}")
        print(f"cache: {args.out}")
        return 0

    os.makedirs(args.out, exist_ok=True)
    failures = []
    for i, name in enumerate(names, 1):
        prefix = f"[{i}/{len(names)}] {name:20s}"
        existing = read_manifest_if_complete(args.out, name)
        if existing and not args.force and not os.path.isfile(os.path.join(args.out, f"{name}.pt")):
            start = time.perf_counter()
            command = [sys.executable, os.path.abspath(__file__), "--torchscript-worker", name,
                       "--out", args.out]
            result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                                    text=True)
            if result.returncode != 0:
                print(f"{prefix} TorchScript FAILED", flush=True)
                print(result.stdout + result.stderr, file=sys.stderr)
                failures.append(name)
            else:
                print(f"{prefix} present; TorchScript {name}.pt written and checked "
                      f"({time.perf_counter() - start:.1f} s)", flush=True)
            continue
        if existing and not args.force:
            print(f"{prefix} present, skipped (--force to re-export)", flush=True)
            continue
        if existing:
            os.remove(manifest_path(args.out, name))
        live = sys.stdout.isatty()  # a log file gets one line per model, a terminal a live one
        back = "\r" if live else ""
        if live:
            print(f"{prefix} exporting ...", end="", flush=True)
        command = [sys.executable, os.path.abspath(__file__), "--worker", name, "--out", args.out]
        if args.opset:
            command += ["--opset", str(args.opset)]
        start = time.perf_counter()
        result = subprocess.run(command, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        manifest = read_manifest_if_complete(args.out, name)
        if result.returncode != 0 or manifest is None:
            print(f"{back}{prefix} FAILED after {time.perf_counter() - start:.1f} s",
                  flush=True)
            print(result.stdout + result.stderr, file=sys.stderr)
            failures.append(name)
            continue
        print(f"{back}{prefix} {describe(manifest)}", flush=True)
    print(f"cache: {args.out}")
    if failures:
        print(f"failed: {', '.join(failures)}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

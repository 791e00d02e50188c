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
from pathlib import Path

# Bump when any model, input or export setting changes so stale caches are rebuilt.
EXPORT_VERSION = 1


def default_cache_dir() -> Path:
    base = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
    return Path(base) / "grove" / "models"


# ---------------------------------------------------------------------------------------------
# Model definitions. Imports of torch happen lazily so `--help` and the runner's cache check
# stay fast.


def _randomize_norm_stats(model, torch, seed):
    """Default BatchNorm/LayerNorm parameters are identity-like; perturb them so folding or
    normalization bugs show up in the outputs instead of hiding behind mean 0 / var 1."""
    gen = torch.Generator().manual_seed(seed)
    for module in model.modules():
        if isinstance(module, torch.nn.BatchNorm2d):
            n = module.num_features
            module.running_mean.copy_(torch.randn(n, generator=gen) * 0.1)
            module.running_var.copy_(torch.rand(n, generator=gen) + 0.5)
            module.weight.data.copy_(torch.rand(n, generator=gen) + 0.5)
            module.bias.data.copy_(torch.randn(n, generator=gen) * 0.1)
        elif isinstance(module, torch.nn.LayerNorm):
            shape = module.normalized_shape
            module.weight.data.copy_(torch.rand(shape, generator=gen) + 0.5)
            module.bias.data.copy_(torch.randn(shape, generator=gen) * 0.1)


def build_resnet18(torch):
    import torchvision
    model = torchvision.models.resnet18(weights=None)
    _randomize_norm_stats(model, torch, seed=1)
    return model


def build_mobilenet_v2(torch):
    import torchvision
    model = torchvision.models.mobilenet_v2(weights=None)
    _randomize_norm_stats(model, torch, seed=2)
    return model


def build_bert2(torch):
    nn = torch.nn
    F = torch.nn.functional

    class SelfAttention(nn.Module):
        def __init__(self, hidden, heads):
            super().__init__()
            self.heads = heads
            self.head_dim = hidden // heads
            self.query = nn.Linear(hidden, hidden)
            self.key = nn.Linear(hidden, hidden)
            self.value = nn.Linear(hidden, hidden)
            self.out = nn.Linear(hidden, hidden)

        def split_heads(self, x):
            # x.size() in the export becomes Shape->Gather->Unsqueeze->Concat->Reshape.
            batch, seq = x.size(0), x.size(1)
            return x.view(batch, seq, self.heads, self.head_dim).permute(0, 2, 1, 3)

        def forward(self, x, additive_mask):
            q = self.split_heads(self.query(x))
            k = self.split_heads(self.key(x))
            v = self.split_heads(self.value(x))
            scores = torch.matmul(q, k.transpose(-1, -2)) / (self.head_dim ** 0.5)
            probs = F.softmax(scores + additive_mask, dim=-1)
            context = torch.matmul(probs, v).permute(0, 2, 1, 3).contiguous()
            batch, seq = context.size(0), context.size(1)
            return self.out(context.view(batch, seq, self.heads * self.head_dim))

    class EncoderLayer(nn.Module):
        def __init__(self, hidden, heads, ffn):
            super().__init__()
            self.attention = SelfAttention(hidden, heads)
            self.attention_norm = nn.LayerNorm(hidden, eps=1e-12)
            self.ffn_in = nn.Linear(hidden, ffn)
            self.ffn_out = nn.Linear(ffn, hidden)
            self.ffn_norm = nn.LayerNorm(hidden, eps=1e-12)

        def forward(self, x, additive_mask):
            x = self.attention_norm(x + self.attention(x, additive_mask))
            return self.ffn_norm(x + self.ffn_out(F.gelu(self.ffn_in(x))))  # erf GELU

    class Bert2(nn.Module):
        def __init__(self, vocab=1000, hidden=128, heads=4, layers=2, ffn=512, max_pos=128):
            super().__init__()
            self.word_embeddings = nn.Embedding(vocab, hidden)
            self.position_embeddings = nn.Embedding(max_pos, hidden)
            self.embedding_norm = nn.LayerNorm(hidden, eps=1e-12)
            self.layers = nn.ModuleList(EncoderLayer(hidden, heads, ffn) for _ in range(layers))
            self.register_buffer("position_ids", torch.arange(max_pos).unsqueeze(0))

        def forward(self, input_ids, attention_mask):
            seq = input_ids.size(1)
            positions = self.position_ids[:, :seq]
            x = self.word_embeddings(input_ids) + self.position_embeddings(positions)
            x = self.embedding_norm(x)
            # [batch, seq] of 1/0 -> additive [batch, 1, 1, seq], as BERT does.
            additive_mask = (1.0 - attention_mask[:, None, None, :].to(x.dtype)) * -10000.0
            for layer in self.layers:
                x = layer(x, additive_mask)
            return x

    model = Bert2()
    _randomize_norm_stats(model, torch, seed=3)
    return model


def build_gpt2(torch):
    nn = torch.nn
    F = torch.nn.functional

    class CausalSelfAttention(nn.Module):
        def __init__(self, hidden, heads, max_pos):
            super().__init__()
            self.heads = heads
            self.head_dim = hidden // heads
            self.qkv = nn.Linear(hidden, 3 * hidden)
            self.proj = nn.Linear(hidden, hidden)
            causal = torch.tril(torch.ones(max_pos, max_pos, dtype=torch.bool))
            self.register_buffer("causal", causal.view(1, 1, max_pos, max_pos))

        def forward(self, x):
            batch, seq, hidden = x.size()
            q, k, v = self.qkv(x).split(hidden, dim=2)
            q = q.view(batch, seq, self.heads, self.head_dim).transpose(1, 2)
            k = k.view(batch, seq, self.heads, self.head_dim).transpose(1, 2)
            v = v.view(batch, seq, self.heads, self.head_dim).transpose(1, 2)
            scores = (q @ k.transpose(-2, -1)) * (1.0 / (self.head_dim ** 0.5))
            allowed = self.causal[:, :, :seq, :seq]
            scores = scores.masked_fill(~allowed, float("-inf"))
            context = F.softmax(scores, dim=-1) @ v
            context = context.transpose(1, 2).contiguous().view(batch, seq, hidden)
            return self.proj(context)

    class Block(nn.Module):
        def __init__(self, hidden, heads, max_pos):
            super().__init__()
            self.ln_1 = nn.LayerNorm(hidden)
            self.attn = CausalSelfAttention(hidden, heads, max_pos)
            self.ln_2 = nn.LayerNorm(hidden)
            self.fc = nn.Linear(hidden, 4 * hidden)
            self.fc_proj = nn.Linear(4 * hidden, hidden)

        def forward(self, x):
            x = x + self.attn(self.ln_1(x))
            return x + self.fc_proj(F.gelu(self.fc(self.ln_2(x)), approximate="tanh"))

    class Gpt2(nn.Module):
        def __init__(self, vocab=1000, hidden=128, heads=4, layers=2, max_pos=128):
            super().__init__()
            self.wte = nn.Embedding(vocab, hidden)
            self.wpe = nn.Embedding(max_pos, hidden)
            self.blocks = nn.ModuleList(Block(hidden, heads, max_pos) for _ in range(layers))
            self.ln_f = nn.LayerNorm(hidden)
            self.lm_head = nn.Linear(hidden, vocab, bias=False)
            self.lm_head.weight = self.wte.weight  # tied, as in GPT-2

        def forward(self, input_ids):
            seq = input_ids.size(1)
            positions = torch.arange(seq, dtype=torch.long, device=input_ids.device)
            x = self.wte(input_ids) + self.wpe(positions).unsqueeze(0)
            for block in self.blocks:
                x = block(x)
            return self.lm_head(self.ln_f(x))

    model = Gpt2()
    with torch.no_grad():
        model.wte.weight.normal_(0.0, 0.02)  # GPT-2's init keeps tied logits moderate
        model.wpe.weight.normal_(0.0, 0.01)
    _randomize_norm_stats(model, torch, seed=4)
    return model


def build_yolo_head(torch):
    nn = torch.nn

    def conv(cin, cout, k, stride=1):
        return nn.Sequential(nn.Conv2d(cin, cout, k, stride, k // 2, bias=False),
                             nn.BatchNorm2d(cout), nn.LeakyReLU(0.1))

    class YoloHead(nn.Module):
        """Two-scale YOLOv3-style neck: the deep feature is upsampled (nearest, x2) and
        concatenated with the shallower one, then each scale gets a 1x1 prediction conv."""

        def __init__(self, anchors=3, classes=4):
            super().__init__()
            out = anchors * (5 + classes)
            self.stem = nn.Sequential(conv(3, 16, 3, 2), conv(16, 32, 3, 2))
            self.down = nn.Sequential(conv(32, 64, 3, 2), conv(64, 32, 1))
            self.predict_coarse = nn.Conv2d(32, out, 1)
            self.lateral = conv(32, 16, 1)
            self.upsample = nn.Upsample(scale_factor=2, mode="nearest")
            self.fuse = conv(16 + 32, 32, 3)
            self.predict_fine = nn.Conv2d(32, out, 1)

        def forward(self, x):
            shallow = self.stem(x)
            deep = self.down(shallow)
            coarse = self.predict_coarse(deep)
            merged = torch.cat([self.upsample(self.lateral(deep)), shallow], dim=1)
            fine = self.predict_fine(self.fuse(merged))
            return coarse, fine

    model = YoloHead()
    _randomize_norm_stats(model, torch, seed=5)
    return model


def build_fpn_seg(torch):
    nn = torch.nn
    F = torch.nn.functional

    class FpnSeg(nn.Module):
        """Tiny FPN segmentation head: a strided encoder, a learned x2 upsampling
        (ConvTranspose2d) merged with a skip, and a bilinear resize back to input size."""

        def __init__(self, classes=5):
            super().__init__()
            self.enc1 = nn.Sequential(nn.Conv2d(3, 16, 3, 2, 1), nn.BatchNorm2d(16), nn.ReLU())
            self.enc2 = nn.Sequential(nn.Conv2d(16, 32, 3, 2, 1), nn.BatchNorm2d(32), nn.ReLU())
            self.up = nn.ConvTranspose2d(32, 16, kernel_size=4, stride=2, padding=1)
            self.up_odd = nn.ConvTranspose2d(16, 8, kernel_size=3, stride=2, padding=1,
                                             output_padding=1)
            self.skip = nn.Conv2d(16, 16, 1)
            self.classify = nn.Conv2d(8, classes, 1)

        def forward(self, x):
            f1 = self.enc1(x)
            f2 = self.enc2(f1)
            merged = F.relu(self.up(f2) + self.skip(f1))
            logits = self.classify(self.up_odd(merged))
            # Non-integer ratio on purpose: 64 -> 48 -> 80 exercises bilinear weights.
            logits = F.interpolate(logits, size=(48, 48), mode="bilinear", align_corners=False)
            return F.interpolate(logits, scale_factor=5.0 / 3.0, mode="bilinear",
                                 align_corners=False)

    model = FpnSeg()
    _randomize_norm_stats(model, torch, seed=6)
    return model


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
            build=build_yolo_head, opset=13, inputs=["image"],
            outputs=["pred_coarse", "pred_fine"],
            cases={"b1_64": lambda rng: {"image": _image(rng, (1, 3, 64, 64))}}),
        "fpn_seg": dict(
            build=build_fpn_seg, opset=13, inputs=["image"], outputs=["mask_logits"],
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
    torch.onnx.export(
        model, export_inputs, str(onnx_path), opset_version=spec["opset"],
        input_names=spec["inputs"], output_names=spec["outputs"],
        dynamic_axes=spec.get("dynamic_axes"), do_constant_folding=True)

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

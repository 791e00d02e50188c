#!/usr/bin/python3
"""Exports decoders with a KV cache (past_key_values inputs, present outputs), the way
torch.onnx and Hugging Face's exporters write them, with fixed-seed random weights, for
`grove generate` and the decode benchmark (docs/generation.md):

  gpt2_kv        GPT-2 124M shape: 12 layers, 768 hidden, 12 heads, vocab 50257, tanh-GELU
  gpt2_kv_tiny   the same graph at 2 layers, 64 hidden, 4 heads, vocab 97 (tests)
  gpt2_kv_tiny_nomask  gpt2_kv_tiny without attention_mask and position_ids (tests)
  llama_1b       LLaMA shape at 1.1B parameters (TinyLlama's): 22 layers, 2048 hidden, 32 query
                 heads sharing 4 key/value heads (grouped-query attention), RoPE, RMSNorm, SwiGLU
                 MLP of 5632, vocab 32000, untied LM head; 4.4 GB of fp32 weights, stored beside
                 the model as NAME/NAME.onnx + NAME/NAME.onnx.data
  llama_kv_tiny  the same graph at 2 layers, 64 hidden, 4 query and 2 key/value heads (tests)

Graph inputs, for a batch B, S new tokens and a past of P positions:
  input_ids            int64 [B, S]
  attention_mask       int64 [B, P + S]   1 = attend, 0 = an empty cache slot or padding
  position_ids         int64 [B, S]       absolute positions of the new tokens
  past_key_values.N.key / .value  float [B, heads, P, head_dim]
Outputs: logits float [B, S, vocab]; present.N.key / .value float [B, heads, P + S, head_dim]
(the past with the new tokens' keys and values appended; LLaMA's cache has its key/value
heads, its keys already rotated). A query attends to every past
slot its mask allows and causally to the new tokens; positions come from position_ids, so a
cache with empty (masked) slots gives the same logits as a packed one.

Per model NAME it writes NAME.onnx and NAME.json (the configuration) into --out, plus, with
--reference, NAME.ref.json: PyTorch's greedy continuation of a fixed prompt (the oracle of
the generation tests).

  /usr/bin/python3 bench/models/export_decoder_models.py [--out DIR] [--only gpt2_kv,llama_1b] [--reference]
"""
import argparse
import json
import math
import os
import sys
import time

import numpy as np
import torch
from torch import nn
from torch.nn import functional as F

CONFIGS = {
    "gpt2_kv": dict(layers=12, hidden=768, heads=12, ffn=3072, vocab=50257, max_positions=1024, std=0.02),
    # Larger weights than GPT-2's 0.02, so that the greedy tokens change from step to step and
    # a wrong cache shows in them.
    "gpt2_kv_tiny": dict(layers=2, hidden=64, heads=4, ffn=256, vocab=97, max_positions=128, std=0.25),
    # Without attention_mask and position_ids (positions follow the past's length): the cache
    # cannot have empty slots, so it grows by one position per step.
    "gpt2_kv_tiny_nomask": dict(layers=2, hidden=64, heads=4, ffn=256, vocab=97, max_positions=128, std=0.25,
                                masked=False),
    "llama_1b": dict(arch="llama", layers=22, hidden=2048, heads=32, kv_heads=4, ffn=5632, vocab=32000, std=0.02),
    "llama_kv_tiny": dict(arch="llama", layers=2, hidden=64, heads=4, kv_heads=2, ffn=128, vocab=97, std=0.25),
}
SEED = 20261203
OPSET = 17


class Block(nn.Module):
    """Pre-LayerNorm GPT-2 block: fused QKV projection, attention over past + new keys with
    the cache mask and the causal mask, tanh-GELU MLP."""

    def __init__(self, hidden, heads, ffn):
        super().__init__()
        self.heads = heads
        self.ln_1 = nn.LayerNorm(hidden, eps=1e-5)
        self.c_attn = nn.Linear(hidden, 3 * hidden)
        self.attn_proj = nn.Linear(hidden, hidden)
        self.ln_2 = nn.LayerNorm(hidden, eps=1e-5)
        self.c_fc = nn.Linear(hidden, ffn)
        self.mlp_proj = nn.Linear(ffn, hidden)

    def forward(self, x, allowed, past_k, past_v):
        b, s, h = x.shape
        d = h // self.heads
        q, k, v = self.c_attn(self.ln_1(x)).split(h, dim=2)
        q, k, v = (t.reshape(b, s, self.heads, d).permute(0, 2, 1, 3) for t in (q, k, v))
        k = torch.cat([past_k, k], dim=2)
        v = torch.cat([past_v, v], dim=2)
        scores = torch.matmul(q, k.transpose(-1, -2)) * (1.0 / math.sqrt(d))
        scores = torch.where(allowed, scores, torch.tensor(torch.finfo(scores.dtype).min))
        ctx = torch.matmul(torch.softmax(scores, -1), v).permute(0, 2, 1, 3).reshape(b, s, h)
        x = x + self.attn_proj(ctx)
        return x + self.mlp_proj(F.gelu(self.c_fc(self.ln_2(x)), approximate="tanh")), k, v


class Gpt2Kv(nn.Module):
    def __init__(self, layers, hidden, heads, ffn, vocab, max_positions, masked=True):
        super().__init__()
        self.masked = masked
        self.wte = nn.Embedding(vocab, hidden)
        self.wpe = nn.Embedding(max_positions, hidden)
        self.blocks = nn.ModuleList(Block(hidden, heads, ffn) for _ in range(layers))
        self.ln_f = nn.LayerNorm(hidden, eps=1e-5)
        self.register_buffer("lm_head_bias", torch.zeros(vocab), persistent=False)

    def forward(self, input_ids, *rest):
        if self.masked:
            attention_mask, position_ids, past = rest[0], rest[1], rest[2:]
        else:
            past = rest
        b, s = input_ids.shape
        p = past[0].shape[2]
        if not self.masked:
            position_ids = torch.arange(p, p + s, device=input_ids.device)[None].expand(b, s)
        x = self.wte(input_ids) + self.wpe(position_ids)
        # Query i sits after the P cache slots: it sees the slots its mask allows and new
        # tokens 0..i. Built from Range and comparisons, so it holds for any P and S.
        q_index = torch.arange(s, device=x.device)[:, None] + p
        k_index = torch.arange(p + s, device=x.device)[None, :]
        allowed = (k_index <= q_index)[None, None]
        if self.masked:
            allowed = allowed & (attention_mask[:, None, None, :] > 0)
        presents = []
        for i, block in enumerate(self.blocks):
            x, k, v = block(x, allowed, past[2 * i], past[2 * i + 1])
            presents += [k, v]
        x = self.ln_f(x)
        # Gemm(transB=1) on the embedding table: the tied weight is stored once.
        logits = F.linear(x.reshape(b * s, -1), self.wte.weight, self.lm_head_bias).reshape(b, s, -1)
        return (logits, *presents)


class RmsNorm(nn.Module):
    def __init__(self, hidden, eps=1e-5):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.ones(hidden))

    def forward(self, x):
        return x * torch.rsqrt(x.pow(2).mean(-1, keepdim=True) + self.eps) * self.weight


def rotate(x, cos, sin):
    """RoPE as LLaMA applies it: the two halves of each head rotated by position."""
    half = x.shape[-1] // 2
    return x * cos + torch.cat([-x[..., half:], x[..., :half]], dim=-1) * sin


class LlamaBlock(nn.Module):
    """Pre-RMSNorm block: grouped-query attention with RoPE on queries and keys (the cache
    holds the rotated keys of the key/value heads), SwiGLU MLP, no biases."""

    def __init__(self, hidden, heads, kv_heads, ffn):
        super().__init__()
        self.heads, self.kv_heads, self.d = heads, kv_heads, hidden // heads
        self.norm_1 = RmsNorm(hidden)
        self.q = nn.Linear(hidden, hidden, bias=False)
        self.k = nn.Linear(hidden, kv_heads * self.d, bias=False)
        self.v = nn.Linear(hidden, kv_heads * self.d, bias=False)
        self.o = nn.Linear(hidden, hidden, bias=False)
        self.norm_2 = RmsNorm(hidden)
        self.gate = nn.Linear(hidden, ffn, bias=False)
        self.up = nn.Linear(hidden, ffn, bias=False)
        self.down = nn.Linear(ffn, hidden, bias=False)

    def forward(self, x, cos, sin, allowed, past_k, past_v):
        b, s, h = x.shape
        y = self.norm_1(x)
        q = self.q(y).reshape(b, s, self.heads, self.d).transpose(1, 2)
        k = self.k(y).reshape(b, s, self.kv_heads, self.d).transpose(1, 2)
        v = self.v(y).reshape(b, s, self.kv_heads, self.d).transpose(1, 2)
        q, k = rotate(q, cos, sin), rotate(k, cos, sin)
        k = torch.cat([past_k, k], dim=2)
        v = torch.cat([past_v, v], dim=2)
        t = k.shape[2]
        group = self.heads // self.kv_heads  # each key/value head serves `group` query heads
        kr = k[:, :, None].expand(b, self.kv_heads, group, t, self.d).reshape(b, self.heads, t, self.d)
        vr = v[:, :, None].expand(b, self.kv_heads, group, t, self.d).reshape(b, self.heads, t, self.d)
        scores = torch.matmul(q, kr.transpose(-1, -2)) * (1.0 / math.sqrt(self.d))
        scores = torch.where(allowed, scores, torch.tensor(torch.finfo(scores.dtype).min))
        ctx = torch.matmul(torch.softmax(scores, -1), vr).transpose(1, 2).reshape(b, s, h)
        x = x + self.o(ctx)
        y = self.norm_2(x)
        return x + self.down(F.silu(self.gate(y)) * self.up(y)), k, v


class LlamaKv(nn.Module):
    def __init__(self, layers, hidden, heads, kv_heads, ffn, vocab):
        super().__init__()
        self.masked = True
        self.embed = nn.Embedding(vocab, hidden)
        self.blocks = nn.ModuleList(LlamaBlock(hidden, heads, kv_heads, ffn) for _ in range(layers))
        self.norm = RmsNorm(hidden)
        self.lm_head = nn.Linear(hidden, vocab, bias=False)
        d = hidden // heads
        self.register_buffer("inv_freq", 1.0 / 10000 ** (torch.arange(0, d, 2).float() / d), persistent=False)

    def forward(self, input_ids, attention_mask, position_ids, *past):
        b, s = input_ids.shape
        p = past[0].shape[2]
        x = self.embed(input_ids)
        angles = position_ids[..., None].float() * self.inv_freq  # [b, s, d / 2]
        angles = torch.cat([angles, angles], dim=-1)[:, None]  # [b, 1, s, d]
        cos, sin = angles.cos(), angles.sin()
        q_index = torch.arange(s, device=x.device)[:, None] + p
        k_index = torch.arange(p + s, device=x.device)[None, :]
        allowed = (k_index <= q_index)[None, None] & (attention_mask[:, None, None, :] > 0)
        presents = []
        for i, block in enumerate(self.blocks):
            x, k, v = block(x, cos, sin, allowed, past[2 * i], past[2 * i + 1])
            presents += [k, v]
        return (self.lm_head(self.norm(x)), *presents)


def cache_shape(cfg):
    """(heads, head dim) of a cache input: the key/value heads for LLaMA."""
    return cfg.get("kv_heads", cfg["heads"]), cfg["hidden"] // cfg["heads"]


def build(name):
    cfg = dict(CONFIGS[name])
    std = cfg.pop("std")
    gen = torch.Generator().manual_seed(SEED + len(name))
    if cfg.get("arch") == "llama":
        model = LlamaKv(**{k: v for k, v in cfg.items() if k != "arch"})
    else:
        model = Gpt2Kv(**cfg)
    with torch.no_grad():
        for m in model.modules():
            if isinstance(m, (nn.Linear, nn.Embedding)):
                m.weight.copy_(std * torch.randn(m.weight.shape, generator=gen))
            if isinstance(m, nn.Linear) and m.bias is not None:
                m.bias.copy_(0.02 * torch.randn(m.bias.shape, generator=gen))
            if isinstance(m, nn.LayerNorm):
                m.weight.copy_(1.0 + 0.1 * torch.randn(m.weight.shape, generator=gen))
                m.bias.copy_(0.05 * torch.randn(m.bias.shape, generator=gen))
            if isinstance(m, RmsNorm):
                m.weight.copy_(1.0 + 0.1 * torch.randn(m.weight.shape, generator=gen))
    return model.eval(), cfg, std


def io_names(layers, masked=True):
    past = [f"past_key_values.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
    present = [f"present.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
    head = ["input_ids", "attention_mask", "position_ids"] if masked else ["input_ids"]
    return head + past, ["logits"] + present


def export(name, out_dir):
    t0 = time.time()
    model, cfg, std = build(name)
    heads, d = cache_shape(cfg)
    masked = cfg.get("masked", True)
    inputs, outputs = io_names(cfg["layers"], masked)
    p, s = 3, 2
    head = (torch.zeros(1, s, dtype=torch.int64), torch.ones(1, p + s, dtype=torch.int64), torch.arange(p, p + s)[None])
    args = (*(head if masked else head[:1]), *[torch.zeros(1, heads, p, d) for _ in range(2 * cfg["layers"])])
    dynamic = {"input_ids": {0: "batch", 1: "sequence"}, "attention_mask": {0: "batch", 1: "total"},
               "position_ids": {0: "batch", 1: "sequence"}, "logits": {0: "batch", 1: "sequence"}}
    for n in inputs[len(inputs) - 2 * cfg["layers"]:]:
        dynamic[n] = {0: "batch", 2: "past"}
    for n in outputs[1:]:
        dynamic[n] = {0: "batch", 2: "total"}
    parameters = sum(t.numel() for t in model.parameters())
    large = parameters * 4 > (1 << 31) - (64 << 20)  # past protobuf's 2 GB: weights in a data file
    folder = os.path.join(out_dir, name) if large else out_dir
    os.makedirs(folder, exist_ok=True)
    path = os.path.join(folder, name + ".onnx")
    with torch.no_grad():
        torch.onnx.export(model, args, path + ".partial", opset_version=OPSET, input_names=inputs,
                          output_names=outputs, dynamic_axes=dynamic)
    if large:  # torch writes a file per tensor beside the model: gather them into one
        import onnx
        m = onnx.load(path + ".partial")
        onnx.save_model(m, path, save_as_external_data=True, all_tensors_to_one_file=True,
                        location=name + ".onnx.data", size_threshold=1024)
        for f in os.listdir(folder):
            if f not in (name + ".onnx", name + ".onnx.data", name + ".json"):
                os.remove(os.path.join(folder, f))
    else:
        os.replace(path + ".partial", path)
    with open(os.path.join(folder, name + ".json"), "w") as f:
        json.dump(dict(cfg, std=std, name=name, seed=SEED, opset=OPSET, parameters=parameters,
                       cache_heads=heads, head_dim=d), f, indent=1)
    size = sum(os.path.getsize(os.path.join(folder, f)) for f in os.listdir(folder) if f.startswith(name + ".onnx"))
    print(f"{name}: {size >> 20} MiB in {time.time() - t0:.1f} s -> {path}", flush=True)
    return model, cfg


@torch.no_grad()
def greedy(model, cfg, prompt, new_tokens):
    """PyTorch's greedy continuation through the cache, one token per step after the prompt."""
    heads, d = cache_shape(cfg)
    past = [torch.zeros(1, heads, 0, d) for _ in range(2 * cfg["layers"])]
    ids = torch.tensor([prompt])
    out, step_logits = [], []
    for _ in range(new_tokens):
        p, s = past[0].shape[2], ids.shape[1]
        head = (torch.ones(1, p + s, dtype=torch.int64), torch.arange(p, p + s)[None]) if model.masked else ()
        res = model(ids, *head, *past)
        logits, past = res[0], list(res[1:])
        last = logits[0, -1]
        step_logits.append(last.numpy().astype(np.float64))
        ids = torch.tensor([[int(last.argmax())]])
        out.append(int(last.argmax()))
    return out, step_logits


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                                                  "grove", "bench"))
    ap.add_argument("--only", default="gpt2_kv", help=f"comma list of: {', '.join(CONFIGS)}")
    ap.add_argument("--reference", action="store_true",
                    help="also write NAME.ref.json: PyTorch's greedy continuation of a fixed prompt")
    ap.add_argument("--new-tokens", type=int, default=12)
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for name in a.only.split(","):
        if name not in CONFIGS:
            sys.exit(f"unknown model {name!r}; known: {', '.join(CONFIGS)}")
        model, cfg = export(name, a.out)
        if a.reference:
            runs = []
            for seed, length in ((3, 5), (4, 1), (5, 9)):
                prompt = [int(t) for t in torch.randint(0, cfg["vocab"], (length,),
                                                        generator=torch.Generator().manual_seed(seed))]
                tokens, logits = greedy(model, cfg, prompt, a.new_tokens)
                runs.append({"prompt": prompt, "tokens": tokens,
                             "last_logits": [round(float(x), 6) for x in logits[-1]]})
            with open(os.path.join(a.out, name + ".ref.json"), "w") as f:
                json.dump(runs, f)


if __name__ == "__main__":
    main()

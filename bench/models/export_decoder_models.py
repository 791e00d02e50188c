#!/usr/bin/python3
"""Exports decoders with a KV cache (past_key_values inputs, present outputs), the way
torch.onnx and Hugging Face's exporters write them, with fixed-seed random weights, for
`grove generate` and the decode benchmark (docs/generation.md):

  gpt2_kv        GPT-2 124M shape: 12 layers, 768 hidden, 12 heads, vocab 50257, tanh-GELU
  gpt2_kv_tiny   the same graph at 2 layers, 64 hidden, 4 heads, vocab 97 (tests)
  gpt2_kv_tiny_nomask  gpt2_kv_tiny without attention_mask and position_ids (tests)

Graph inputs, for a batch B, S new tokens and a past of P positions:
  input_ids            int64 [B, S]
  attention_mask       int64 [B, P + S]   1 = attend, 0 = an empty cache slot or padding
  position_ids         int64 [B, S]       absolute positions of the new tokens
  past_key_values.N.key / .value  float [B, heads, P, head_dim]
Outputs: logits float [B, S, vocab]; present.N.key / .value float [B, heads, P + S, head_dim]
(the past with the new tokens' keys and values appended). A query attends to every past
slot its mask allows and causally to the new tokens; positions come from position_ids, so a
cache with empty (masked) slots gives the same logits as a packed one.

Per model NAME it writes NAME.onnx and NAME.json (the configuration) into --out, plus, with
--reference, NAME.ref.json: PyTorch's greedy continuation of a fixed prompt (the oracle of
the generation tests).

  /usr/bin/python3 bench/models/export_decoder_models.py [--out DIR] [--only gpt2_kv_tiny] [--reference]
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


def build(name):
    cfg = dict(CONFIGS[name])
    std = cfg.pop("std")
    gen = torch.Generator().manual_seed(SEED + len(name))
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
    return model.eval(), cfg, std


def io_names(layers, masked=True):
    past = [f"past_key_values.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
    present = [f"present.{i}.{kv}" for i in range(layers) for kv in ("key", "value")]
    head = ["input_ids", "attention_mask", "position_ids"] if masked else ["input_ids"]
    return head + past, ["logits"] + present


def export(name, out_dir):
    t0 = time.time()
    model, cfg, std = build(name)
    heads, d = cfg["heads"], cfg["hidden"] // cfg["heads"]
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
    path = os.path.join(out_dir, name + ".onnx")
    with torch.no_grad():
        torch.onnx.export(model, args, path + ".partial", opset_version=OPSET, input_names=inputs,
                          output_names=outputs, dynamic_axes=dynamic)
    os.replace(path + ".partial", path)
    with open(os.path.join(out_dir, name + ".json"), "w") as f:
        json.dump(dict(cfg, std=std, name=name, seed=SEED, opset=OPSET,
                       parameters=sum(t.numel() for t in model.parameters())), f, indent=1)
    print(f"{name}: {os.path.getsize(path) >> 20} MiB in {time.time() - t0:.1f} s", flush=True)
    return model, cfg


@torch.no_grad()
def greedy(model, cfg, prompt, new_tokens):
    """PyTorch's greedy continuation through the cache, one token per step after the prompt."""
    heads, d = cfg["heads"], cfg["hidden"] // cfg["heads"]
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
    ap.add_argument("--only", default=",".join(CONFIGS))
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

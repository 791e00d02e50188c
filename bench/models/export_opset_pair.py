#!/usr/bin/env python3
"""Exports one small BERT encoder (bench_defs.Bert, 4L/256H/4A, seq 128, batch 1) with
torch.onnx.export at opset 13 and at opset 17, for comparing how grove runs the two forms
(opset 13 spells LayerNorm out as ReduceMean/Sub/Pow/Sqrt/Div; 17 has LayerNormalization).
See docs/graph-passes.md.  Usage: export_opset_pair.py OUT_DIR"""
import os
import sys

import torch

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from bench_defs import TransformerConfig, bert_builder, bert_inputs  # noqa: E402

SMALL_BERT = TransformerConfig(4, 256, 4, 1024, 8000, 512, 1e-12)


def main() -> None:
    out = sys.argv[1]
    os.makedirs(out, exist_ok=True)
    gen = torch.Generator().manual_seed(7)
    model = bert_builder(SMALL_BERT)(gen)
    inputs = bert_inputs(1, 128, SMALL_BERT.vocab)(gen)
    for opset in (13, 17):
        path = os.path.join(out, f"bert_small_opset{opset}.onnx")
        with torch.no_grad():
            torch.onnx.export(model, tuple(inputs.values()), path, opset_version=opset,
                              input_names=list(inputs.keys()),
                              output_names=["last_hidden_state", "pooler_output"], do_constant_folding=True)
        print(path)


if __name__ == "__main__":
    main()

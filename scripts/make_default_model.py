#!/usr/bin/python3
"""Builds grove's default model: a small ResNet-style image classifier with fixed-seed
random weights (it recognises nothing; it exists so `grove demo` has a real CNN to run and
a test has PyTorch's answer to compare with).

Writes, next to each other in models/:
  default.onnx           opset 13, static input 1x3x112x112, output 1x1000 logits
  default_input.npy      a fixed-seed input image (float32, N(0,1))
  default_expected.npy   PyTorch's logits for that input (float32, 1x1000)

Run with Debian's Python, which has torch and onnx:  /usr/bin/python3 scripts/make_default_model.py
The CLI embeds default.onnx and default_input.npy at build time, so rebuild after running.
"""
import os
import sys

import numpy as np
import onnx
import torch
from torch import nn

SEED = 20240601
INPUT_SHAPE = (1, 3, 112, 112)
WIDTHS = (16, 32, 64, 128)
CLASSES = 1000


class BasicBlock(nn.Module):
    """Two 3x3 conv+BN with a residual add; a strided 1x1 projection when the shape changes."""

    def __init__(self, cin, cout, stride):
        super().__init__()
        self.conv1 = nn.Conv2d(cin, cout, 3, stride, 1, bias=False)
        self.bn1 = nn.BatchNorm2d(cout)
        self.conv2 = nn.Conv2d(cout, cout, 3, 1, 1, bias=False)
        self.bn2 = nn.BatchNorm2d(cout)
        self.relu = nn.ReLU()
        self.project = None
        if stride != 1 or cin != cout:
            self.project = nn.Sequential(nn.Conv2d(cin, cout, 1, stride, bias=False), nn.BatchNorm2d(cout))

    def forward(self, x):
        skip = x if self.project is None else self.project(x)
        y = self.relu(self.bn1(self.conv1(x)))
        y = self.bn2(self.conv2(y))
        return self.relu(y + skip)


class SmallResNet(nn.Module):
    def __init__(self):
        super().__init__()
        self.stem = nn.Sequential(
            nn.Conv2d(3, WIDTHS[0], 3, 2, 1, bias=False), nn.BatchNorm2d(WIDTHS[0]), nn.ReLU(),
            nn.MaxPool2d(3, 2, 1))
        blocks, cin = [], WIDTHS[0]
        for i, w in enumerate(WIDTHS):
            blocks.append(BasicBlock(cin, w, 1 if i == 0 else 2))
            blocks.append(BasicBlock(w, w, 1))
            cin = w
        self.stages = nn.Sequential(*blocks)
        self.pool = nn.AdaptiveAvgPool2d(1)
        self.fc = nn.Linear(cin, CLASSES)

    def forward(self, x):
        y = self.pool(self.stages(self.stem(x)))
        return self.fc(torch.flatten(y, 1))


def randomise_batchnorm(model, gen):
    # Non-trivial running statistics, so BN->Conv folding is actually exercised.
    for m in model.modules():
        if isinstance(m, nn.BatchNorm2d):
            c = m.num_features
            m.weight.data = 0.5 + torch.rand(c, generator=gen)
            m.bias.data = 0.2 * torch.randn(c, generator=gen)
            m.running_mean.data = 0.2 * torch.randn(c, generator=gen)
            m.running_var.data = 0.5 + torch.rand(c, generator=gen)


def main():
    out_dir = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "models")
    os.makedirs(out_dir, exist_ok=True)
    torch.manual_seed(SEED)
    gen = torch.Generator().manual_seed(SEED)
    model = SmallResNet()
    randomise_batchnorm(model, gen)
    model.eval()

    x = torch.randn(*INPUT_SHAPE, generator=gen)
    with torch.no_grad():
        expected = model(x)

    onnx_path = os.path.join(out_dir, "default.onnx")
    # PRESERVE (with the model in eval mode) keeps BatchNormalization nodes in the graph
    # instead of letting the exporter fold them: grove's own folding pass should do that.
    torch.onnx.export(model, x, onnx_path, opset_version=13, input_names=["image"],
                      output_names=["logits"], training=torch.onnx.TrainingMode.PRESERVE,
                      do_constant_folding=False)
    m = onnx.load(onnx_path)
    onnx.checker.check_model(m)
    m.graph.name = "grove_default_small_resnet"
    m.producer_name = "grove scripts/make_default_model.py"
    onnx.save(m, onnx_path)

    np.save(os.path.join(out_dir, "default_input.npy"), x.numpy().astype(np.float32))
    np.save(os.path.join(out_dir, "default_expected.npy"), expected.numpy().astype(np.float32))

    ops = {}
    for n in m.graph.node:
        ops[n.op_type] = ops.get(n.op_type, 0) + 1
    size = os.path.getsize(onnx_path)
    params = sum(p.numel() for p in model.parameters())
    print(f"wrote {onnx_path}: {size / 1e6:.2f} MB, {params} parameters, ops {ops}")
    top5 = torch.topk(expected[0], 5)
    print("top-5:", [(int(i), round(float(v), 4)) for v, i in zip(top5.values, top5.indices)])
    if size > 5_000_000:
        sys.exit("default.onnx is over 5 MB; shrink the model")


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Exports the two models of the group-aware paths measurement (docs/scaling.md, DCCNN), with
fixed-seed random weights, into the benchmark cache (NAME.onnx, NAME.in.image.npy,
NAME.out.output.npy):

  resnext50_b1    torchvision ResNeXt-50 32x4d, 1x3x224x224: grouped 3x3 convs between 1x1 convs
  decoupled_cnn   a CNN whose layers after the stem are 4 independent paths: every conv after
                  the stem is grouped (group 4) and feeds the next directly, the block-diagonal
                  weights that connectivity pruning into class-specific paths leaves (DCCNN,
                  thesis 004, 3.2); the paths meet at the pooling and the classifier

  /usr/bin/python3 bench/models/export_paths_models.py [--out DIR]
"""
import argparse
import os

import numpy as np
import torch
import torch.nn as nn


class DecoupledCnn(nn.Module):
    def __init__(self, paths=4, classes=10):
        super().__init__()
        layers = [nn.Conv2d(3, 64, 3, 2, 1), nn.ReLU()]
        cin = 64
        for cout, stride in ((64, 2), (64, 1), (128, 2), (128, 1), (256, 2), (256, 1), (512, 2), (512, 1)):
            layers += [nn.Conv2d(cin, cout, 3, stride, 1, groups=paths), nn.ReLU()]
            cin = cout
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(cin, classes)

    def forward(self, x):
        return self.head(self.body(x).mean(dim=(2, 3)))


def export(model, name, out_dir):
    torch.manual_seed(7)
    for p in model.parameters():  # He-like scale keeps activations finite through the stack
        nn.init.normal_(p, std=(2.0 / max(1, p[0].numel())) ** 0.5 if p.dim() > 1 else 0.01)
    model.eval()
    x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(11))
    with torch.no_grad():
        y = model(x)
        path = os.path.join(out_dir, name + ".onnx")
        torch.onnx.export(model, (x,), path, opset_version=13, input_names=["image"], output_names=["output"])
    np.save(os.path.join(out_dir, name + ".in.image.npy"), x.numpy())
    np.save(os.path.join(out_dir, name + ".out.output.npy"), y.numpy())
    print(name, os.path.getsize(path) // 1024, "KiB")


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--out", default=os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                                                  "grove", "bench"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    import torchvision
    export(torchvision.models.resnext50_32x4d(), "resnext50_b1", a.out)
    export(DecoupledCnn(), "decoupled_cnn", a.out)


if __name__ == "__main__":
    main()

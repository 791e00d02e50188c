#!/usr/bin/python3
"""Exports `widthnet_W`: a plain CNN whose convs all have W output channels, with fixed-seed
random weights, for measuring `grove tail`'s suggestions (docs/scaling.md): run `grove tail`
on one width, export the width it suggests, and time both models whole.

  /usr/bin/python3 bench/models/export_width_model.py --width 100 [--width 96 ...] [--out DIR]

The model: a 3x3 stride-2 stem (3 -> W) on 1x3x224x224, a 3x3 stride-2 conv, six 3x3 convs
W -> W on 56x56, each with ReLU, global average pooling and a 10-way classifier.
"""
import argparse
import os

import numpy as np
import torch
import torch.nn as nn


class WidthNet(nn.Module):
    def __init__(self, width):
        super().__init__()
        layers = [nn.Conv2d(3, width, 3, 2, 1), nn.ReLU(), nn.Conv2d(width, width, 3, 2, 1), nn.ReLU()]
        for _ in range(6):
            layers += [nn.Conv2d(width, width, 3, 1, 1), nn.ReLU()]
        self.body = nn.Sequential(*layers)
        self.head = nn.Linear(width, 10)

    def forward(self, x):
        return self.head(self.body(x).mean(dim=(2, 3)))


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--width", type=int, action="append", required=True)
    ap.add_argument("--out", default=os.path.join(os.environ.get("XDG_CACHE_HOME") or os.path.expanduser("~/.cache"),
                                                  "grove", "bench"))
    a = ap.parse_args()
    os.makedirs(a.out, exist_ok=True)
    for width in a.width:
        torch.manual_seed(width)
        model = WidthNet(width).eval()
        x = torch.randn(1, 3, 224, 224, generator=torch.Generator().manual_seed(11))
        name = f"widthnet_{width}"
        with torch.no_grad():
            y = model(x)
            torch.onnx.export(model, (x,), os.path.join(a.out, name + ".onnx"), opset_version=13,
                              input_names=["image"], output_names=["output"])
        np.save(os.path.join(a.out, name + ".in.image.npy"), x.numpy())
        np.save(os.path.join(a.out, name + ".out.output.npy"), y.numpy())
        print(name)


if __name__ == "__main__":
    main()

"""A slimmable CNN: one set of weights, many widths (paper 002); digits by default.

Every conv keeps a prefix of its output channels in a narrower sub-net, and reads the prefix
of input channels its producer kept. Each sub-net has its own (private) BatchNorm, because
the statistics of a narrower layer differ from the full one's. The first conv and the final
classifier are exempt: they keep all their channels, as the paper does.
"""
import math

import numpy as np
import torch
import torch.nn as nn
import torch.nn.functional as F

# (output channels, stride) of the five 3x3 convs at width multiplier 1.
LAYERS = [(64, 1), (128, 1), (128, 2), (256, 1), (256, 2)]
IMAGE = 16  # digits are 8x8; upsampled so the convs have planes worth tiling
# Most images are held out: trained on all 1437 of an 80% split, every width scores 99-100%
# and the sub-nets cannot be told apart.
TEST_FRACTION = 0.8
CLASSES = 10


def load_digits_split(seed: int):
    """scikit-learn's digits (shipped by python3-sklearn): 1797 8x8 images, a fixed seeded split."""
    from sklearn.datasets import load_digits
    from sklearn.model_selection import train_test_split
    d = load_digits()
    x = torch.tensor(d.images, dtype=torch.float32).unsqueeze(1) / 16.0
    x = F.interpolate(x, size=(IMAGE, IMAGE), mode="bilinear", align_corners=False)
    y = torch.tensor(d.target, dtype=torch.long)
    idx = np.arange(len(y))
    tr, te = train_test_split(idx, test_size=TEST_FRACTION, random_state=seed, stratify=d.target)
    return (x[tr], y[tr]), (x[te], y[te])


def kept(ratio: float, full: int) -> int:
    """Channels a layer keeps at a width ratio: grove's rule (round half up, at least 1)."""
    return max(1, min(full, int(math.floor(ratio * full + 0.5))))


class SlimNet(nn.Module):
    """`subnets` is a list of per-layer output channel counts (len(LAYERS) each); BatchNorm
    is private per sub-net."""

    def __init__(self, width_mult: float, subnets, layers=LAYERS, image=IMAGE):
        super().__init__()
        self.image = image  # the input plane's side, for the export
        self.widths = [max(4, int(c * width_mult)) for c, _ in layers]
        self.strides = [s for _, s in layers]
        self.convs = nn.ParameterList()
        cin = 1
        for w in self.widths:
            p = nn.Parameter(torch.empty(w, cin, 3, 3))
            nn.init.kaiming_normal_(p, nonlinearity="relu")
            self.convs.append(p)
            cin = w
        self.fc = nn.Linear(self.widths[-1], CLASSES)
        self.set_subnets(subnets)

    def set_subnets(self, subnets):
        self.subnets = [list(s) for s in subnets]
        for s in self.subnets:
            assert s[0] == self.widths[0], "the first conv is exempt"
        self.bns = nn.ModuleList(nn.ModuleList(nn.BatchNorm2d(c) for c in s) for s in self.subnets)

    def forward(self, x, subnet: int):
        counts = self.subnets[subnet]
        for layer, (w, stride) in enumerate(zip(self.convs, self.strides)):
            w = w[:counts[layer], :x.shape[1]]
            x = F.relu(self.bns[subnet][layer](F.conv2d(x, w, None, stride, 1)))
        x = torch.flatten(F.adaptive_avg_pool2d(x, 1), 1)
        return F.linear(x, self.fc.weight[:, :x.shape[1]], self.fc.bias)

    def channel_groups(self):
        """(layer index, weight) of every conv whose output channels may be pruned."""
        return [(i, w) for i, w in enumerate(self.convs) if i > 0]

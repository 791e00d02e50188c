"""The CNN the DCCNN kit trains and decouples (thesis 004, 3.2): 3x3 convs with BatchNorm and
ReLU, global average pooling and a linear classifier.

One module serves both forms. The plain network has `groups == 1` everywhere. Its decoupled
form splits the last D convs into `paths` class-specific paths: the first decoupled conv reads
the whole shared feature map and writes its filters path by path; every later one is a grouped
conv (group = paths) that reads only its own path, the block-diagonal weights that pruning the
cross-path connections leaves. The classifier keeps a class's logit connected only to the
features of its own path (a fixed 0/1 mask on the weights).
"""
import torch
import torch.nn as nn
import torch.nn.functional as F

# (output channels, stride) of the six 3x3 convs at width multiplier 1, for 28x28 images.
LAYERS = [(32, 1), (64, 2), (64, 1), (128, 2), (128, 1), (256, 1)]
IMAGE = 28
CLASSES = 10


class PathNet(nn.Module):
    def __init__(self, widths, strides, groups=None, classes=CLASSES):
        """`widths[l]`, `strides[l]`: conv l's output channels and stride; `groups[l]`: its
        group count (1 for a plain conv, the path count for a decoupled conv after the first)."""
        super().__init__()
        groups = groups or [1] * len(widths)
        self.widths, self.strides, self.groups = list(widths), list(strides), list(groups)
        cin = 1
        self.convs = nn.ModuleList()
        self.bns = nn.ModuleList()
        for w, s, g in zip(widths, strides, groups):
            self.convs.append(nn.Conv2d(cin, w, 3, s, 1, groups=g, bias=False))
            self.bns.append(nn.BatchNorm2d(w))
            cin = w
        self.fc = nn.Linear(cin, classes)
        self.register_buffer("fc_mask", torch.ones(classes, cin))

    def features(self, x):
        """Every conv's output after its ReLU (what the class-specific index reads)."""
        out = []
        for conv, bn in zip(self.convs, self.bns):
            x = F.relu(bn(conv(x)))
            out.append(x)
        return out

    def head(self, x):
        return F.linear(x.mean(dim=(2, 3)), self.fc.weight * self.fc_mask, self.fc.bias)

    def forward(self, x):
        return self.head(self.features(x)[-1])


def plain(width_mult=1.0):
    return PathNet([max(4, int(c * width_mult)) for c, _ in LAYERS], [s for _, s in LAYERS])


def conv_flops(net, image=IMAGE):
    """Multiply-adds x 2 of each conv at batch 1, and the classifier's."""
    flops, size, cin = [], image, 1
    for w, s, g in zip(net.widths, net.strides, net.groups):
        size = (size + 2 - 3) // s + 1
        flops.append(2 * w * (cin // g) * 9 * size * size)
        cin = w
    return flops + [2 * int(net.fc_mask.sum())]


def export(net, path, batch="N"):
    """ONNX with a symbolic batch: input `image` [N, 1, 28, 28], output `logits` [N, 10]. The
    exporter folds each BatchNorm into its conv; the masked classifier becomes one Gemm."""
    net.eval()
    x = torch.zeros(1, 1, IMAGE, IMAGE)
    axes = {"image": {0: batch}, "logits": {0: batch}} if isinstance(batch, str) else None
    with torch.no_grad():
        torch.onnx.export(net, (x,), str(path), opset_version=13, input_names=["image"], output_names=["logits"],
                          dynamic_axes=axes)

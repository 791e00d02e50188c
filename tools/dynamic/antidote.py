"""Attention-based dynamic feature-map pruning (Antidote, thesis 004 ch. 3.1) for a plain CNN
on Fashion-MNIST, with the exact semantics grove runs (docs/dynamic.md):

  per image, of feature map F [C, H, W]: keep the int(pc * C) channels of highest mean over
  H x W and the int(ps * H * W) positions of highest mean over C (at least one of each), and
  zero everything else before the next conv (with block=B: the int(ps * blocks) blocks of B x B
  positions, on a grid from (0, 0), of highest mean of their positions' means, and every
  position in them); that conv computes only the outputs whose
  window centre is a kept position (for its 3x3 windows of pad 1 and stride s: output (i, j)
  is centred on (i * s, j * s)), and its other outputs are 0.

Means are taken in float64 (grove does the same), so both pick the same channels.
"""
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
from onnx import TensorProto, helper, numpy_helper

from export_onnx import _np, classifier_head

# conv3x3-BN-ReLU layers as (output channels, stride): the Fashion-MNIST network of the
# sub-nets' kit (tools/dynamic/train_fashion.py), on 28x28 images.
LAYERS = [(32, 1), (64, 2), (64, 1), (128, 2), (128, 1)]
IMAGE = 28
CLASSES = 10
# Feature maps that may be pruned: the ReLU outputs that a conv reads (not the last one,
# which the classifier's pooling reads).
PRUNABLE = len(LAYERS) - 1


def kept(ratio: float, total: int) -> int:
    return min(total, max(1, int(ratio * total)))


def _top(scores, k):
    """Indices of the k highest scores per row; ties keep the lower index (as grove does:
    background pixels of a digit make many positions tie exactly)."""
    return torch.sort(scores, dim=1, descending=True, stable=True).indices[:, :k]


def block_means(scores, block: int):
    """[N, H, W] -> [N, ceil(H / B), ceil(W / B)]: each block's mean of its positions' scores
    (the last row and column of blocks may be cut short)."""
    n, h, w = scores.shape
    bh, bw = -(-h // block), -(-w // block)
    pad = (0, bw * block - w, 0, bh * block - h)
    sums = F.pad(scores, pad).view(n, bh, block, bw, block).sum((2, 4))
    counts = F.pad(torch.ones(1, h, w, dtype=scores.dtype), pad).view(1, bh, block, bw, block).sum((2, 4))
    return sums / counts


def keep_masks(f, pc: float, ps: float, block: int = 1):
    """The 0/1 masks of F [N, C, H, W] that the AttentionKeep decision keeps: of channels and
    positions together [N, C, H, W], and of positions alone [N, 1, H, W]."""
    n, c, h, w = f.shape
    d = f.detach().double()
    chan = _top(d.mean((2, 3)), kept(pc, c))
    mc = torch.zeros(n, c, dtype=f.dtype).scatter_(1, chan, 1.0)
    if block > 1:
        scores = block_means(d.mean(1), block)
        bh, bw = scores.shape[1:]
        spat = _top(scores.flatten(1), kept(ps, bh * bw))
        mb = torch.zeros(n, bh * bw, dtype=f.dtype).scatter_(1, spat, 1.0).view(n, 1, bh, bw)
        ms = mb.repeat_interleave(block, 2).repeat_interleave(block, 3)[:, :, :h, :w]
    else:
        spat = _top(d.mean(1).flatten(1), kept(ps, h * w))
        ms = torch.zeros(n, h * w, dtype=f.dtype).scatter_(1, spat, 1.0).view(n, 1, h, w)
    return mc[:, :, None, None] * ms, ms


class PlainNet(nn.Module):
    """conv3x3-BN-ReLU x 5 (LAYERS), global average pool, linear. `keep[l]` = (pc, ps[, block]) prunes
    the output of layer l (l < PRUNABLE) before layer l + 1 reads it, and layer l + 1 computes
    only the outputs centred on kept positions; None leaves it whole. Training with masks is
    the targeted dropout (TTD) of the thesis: the gradient flows through the kept entries only."""

    def __init__(self, width_mult: float = 1.0):
        super().__init__()
        self.widths = [max(4, int(c * width_mult)) for c, _ in LAYERS]
        self.strides = [s for _, s in LAYERS]
        cin = 1
        self.convs = nn.ModuleList()
        self.bns = nn.ModuleList()
        for w, s in zip(self.widths, self.strides):
            self.convs.append(nn.Conv2d(cin, w, 3, s, 1, bias=False))
            self.bns.append(nn.BatchNorm2d(w))
            cin = w
        self.fc = nn.Linear(cin, CLASSES)

    def forward(self, x, keep=None):
        positions = None  # the kept positions of the map this layer reads, when it was pruned
        for layer, (conv, bn) in enumerate(zip(self.convs, self.bns)):
            x = F.relu(bn(conv(x)))
            if positions is not None:
                s = self.strides[layer]
                x = x * positions[:, :, ::s, ::s]
                positions = None
            if keep and layer < PRUNABLE and keep[layer] is not None:
                both, positions = keep_masks(x, *keep[layer])
                x = x * both
        return self.fc(torch.flatten(F.adaptive_avg_pool2d(x, 1), 1))

    def flops(self, keep=None):
        """Multiply-adds x 2 of the convs and classifier as grove counts them: a pruned map's
        consumer reduces over the kept channels only, at the share of its outputs the kept
        positions give."""
        total, size, cin = 0, IMAGE, 1
        for layer, (w, s) in enumerate(zip(self.widths, self.strides)):
            in_size, plane = size, size * size
            size = (size + 2 - 3) // s + 1
            reads, share = cin, 1.0
            if keep and layer > 0 and keep[layer - 1] is not None:
                k = keep[layer - 1]
                units = (-(-in_size // (k[2] if len(k) > 2 else 1))) ** 2  # positions, or blocks
                reads = kept(k[0], cin)
                share = kept(k[1], units) / units
            total += int(2 * w * reads * 9 * size * size * share)
            cin = w
        return total + 2 * cin * CLASSES


def value_name(layer: int) -> str:
    return f"relu{layer}.out"


def metadata(keep) -> str:
    lines = []
    for layer, k in enumerate(keep or []):
        if k is not None:
            block = f" block={k[2]}" if len(k) > 2 and k[2] > 1 else ""
            lines.append(f"prune {value_name(layer)} channels={k[0]:g} positions={k[1]:g}{block}")
    return "\n".join(lines)


def export(net, path, keep, batch=1):
    """The unpruned network as standard ONNX (ONNX Runtime runs it as it is), BatchNorm left
    unfolded, with `keep` as grove.antidote metadata."""
    inits, nodes, x = [], [], "image"
    for layer, (conv, bn) in enumerate(zip(net.convs, net.bns)):
        s = net.strides[layer]
        inits.append(numpy_helper.from_array(_np(conv.weight), f"conv{layer}.weight"))
        nodes.append(helper.make_node("Conv", [x, f"conv{layer}.weight"], [f"conv{layer}.out"], name=f"conv{layer}",
                                      kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[s, s]))
        for key, value in (("scale", bn.weight), ("bias", bn.bias), ("mean", bn.running_mean), ("var", bn.running_var)):
            inits.append(numpy_helper.from_array(_np(value), f"bn{layer}.{key}"))
        nodes.append(helper.make_node("BatchNormalization", [f"conv{layer}.out"] + [f"bn{layer}.{k}" for k in ("scale", "bias", "mean", "var")],
                                      [f"bn{layer}.out"], name=f"bn{layer}", epsilon=bn.eps))
        nodes.append(helper.make_node("Relu", [f"bn{layer}.out"], [value_name(layer)], name=f"relu{layer}"))
        x = value_name(layer)
    classifier_head(nodes, inits, x, net.fc)
    graph = helper.make_graph(nodes, "antidote_fashion",
                              [helper.make_tensor_value_info("image", TensorProto.FLOAT, [batch, 1, IMAGE, IMAGE])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, CLASSES])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="grove tools/dynamic")
    if keep:
        helper.set_model_props(model, {"grove.antidote": metadata(keep)})
    onnx.checker.check_model(model)
    onnx.save(model, path)

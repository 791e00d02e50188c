"""Structural decoupling by connection pruning (DCCNN, thesis 004, 3.2) of a trained PathNet.

1. Each filter's class-specific index (eq. 3.9): S[n][i] = Act[n][i] * Grad[n][i], the mean L1
   norm of filter i's feature map on images of class n times the mean L1 norm of the gradient
   of class n's logit with respect to that feature map (first-order Taylor significance).
2. Classes are split into `paths` groups of (nearly) equal size; the split taken is the one
   whose groups hold the most similar classes (cosine similarity of their index profiles over
   the last conv's filters), so the distinctions that need shared features stay inside a path.
3. In each decoupled layer every path takes the filters that serve its classes most (the
   group's summed, per-class normalised index), `ratio` of the layer's filters per path; the
   rest are pruned. Cross-path connections are pruned: a path's filters read only its own
   path's channels, which makes the later decoupled convs grouped convs.
"""
import itertools

import numpy as np
import torch

from pathnet import PathNet


def class_index(net, images, labels, per_class=64):
    """S[l] of shape [classes, filters of conv l]: eq. 3.9 on up to `per_class` images of each
    class, each class's row normalised to sum 1 (so no class outweighs the others)."""
    net.eval()
    classes = net.fc.out_features
    index = [torch.zeros(classes, w) for w in net.widths]
    for n in range(classes):
        x = images[labels == n][:per_class]
        if len(x) == 0:
            continue
        maps = net.features(x)
        for m in maps:
            m.retain_grad()
        logits = net.head(maps[-1])
        logits[:, n].sum().backward()
        for l, m in enumerate(maps):
            act = m.detach().abs().sum(dim=(2, 3)).mean(0)
            grad = m.grad.abs().sum(dim=(2, 3)).mean(0)
            s = act * grad
            index[l][n] = s / max(float(s.sum()), 1e-12)
        net.zero_grad()
    return index


def group_sizes(classes, paths):
    return [classes // paths + (1 if g < classes % paths else 0) for g in range(paths)]


def _partitions(items, sizes):
    """Every split of `items` into groups of `sizes` (sizes sorted descending), each split once
    up to the order of equal-sized groups."""
    if not sizes:
        yield []
        return
    first, rest = items[0], items[1:]
    size = sizes[0]
    for others in itertools.combinations(rest, size - 1):
        group = (first,) + others
        left = [i for i in rest if i not in others]
        for tail in _partitions(left, sizes[1:]):
            yield [group] + tail


def group_classes(profile, paths):
    """Groups of class ids (each sorted, groups ordered by their first class) maximising the
    summed pairwise cosine similarity of the classes' profiles within groups. `profile`:
    [classes, features]."""
    classes = profile.shape[0]
    if paths <= 1:
        return [list(range(classes))]
    if paths > classes:
        raise ValueError(f"{paths} paths for {classes} classes: a path needs a class")
    p = profile / np.maximum(np.linalg.norm(profile, axis=1, keepdims=True), 1e-12)
    sim = p @ p.T
    sizes = sorted(group_sizes(classes, paths), reverse=True)
    best, best_score = None, -np.inf
    for split in _partitions(list(range(classes)), sizes):
        score = sum(sim[a, b] for g in split for a, b in itertools.combinations(g, 2))
        if score > best_score + 1e-12:
            best, best_score = split, score
    return sorted([sorted(g) for g in best])


def assign_filters(score, per_path):
    """score: [paths, filters], how much each path's classes use each filter. Returns each
    path's filters (sorted), `per_path` each, no filter in two paths: greedy over the
    (path, filter) pairs from the highest score down."""
    paths, filters = score.shape
    if per_path * paths > filters:
        raise ValueError(f"{paths} paths of {per_path} filters need {per_path * paths}, the layer has {filters}")
    chosen = [[] for _ in range(paths)]
    taken = np.zeros(filters, dtype=bool)
    for flat in np.argsort(-score, axis=None, kind="stable"):
        g, i = divmod(int(flat), filters)
        if taken[i] or len(chosen[g]) == per_path:
            continue
        chosen[g].append(i)
        taken[i] = True
    return [sorted(c) for c in chosen]


def decouple(net, index, class_groups, depth, ratio):
    """The decoupled PathNet of `net`: its last `depth` convs split into len(class_groups)
    paths, each keeping `ratio` of a layer's filters (ratio <= 1/paths; 1/paths keeps all).
    Weights are copied from `net`, cross-path connections dropped. Returns (new net, the
    filters each path kept per decoupled layer)."""
    paths = len(class_groups)
    layers = len(net.widths)
    if not 1 <= depth <= layers:
        raise ValueError(f"decoupling depth {depth}: the network has {layers} convs")
    first = layers - depth
    kept = {}
    widths, groups = list(net.widths), [1] * layers
    for l in range(first, layers):
        per_path = max(1, int(round(ratio * net.widths[l])))
        score = np.stack([index[l][g].sum(0).numpy() for g in class_groups])
        kept[l] = assign_filters(score, per_path)
        widths[l] = per_path * paths
        if l > first:
            groups[l] = paths
    new = PathNet(widths, net.strides, groups, net.fc.out_features)
    with torch.no_grad():
        for l in range(layers):
            src_conv, dst_conv = net.convs[l], new.convs[l]
            src_bn, dst_bn = net.bns[l], new.bns[l]
            rows = list(range(net.widths[l])) if l < first else [i for path in kept[l] for i in path]
            w = src_conv.weight
            if l <= first:
                dst_conv.weight.copy_(w[rows])
            else:  # path g's filters read path g's channels of the layer before, nothing else
                per_path = widths[l] // paths
                for g in range(paths):
                    block = w[kept[l][g]][:, kept[l - 1][g]]
                    dst_conv.weight[g * per_path:(g + 1) * per_path].copy_(block)
            for name in ("weight", "bias", "running_mean", "running_var"):
                getattr(dst_bn, name).copy_(getattr(src_bn, name)[rows])
        last = layers - 1
        order = [i for path in kept[last] for i in path]
        new.fc.weight.copy_(net.fc.weight[:, order])
        new.fc.bias.copy_(net.fc.bias)
        per_path = widths[last] // paths
        new.fc_mask.zero_()
        for g, cls in enumerate(class_groups):
            for n in cls:
                new.fc_mask[n, g * per_path:(g + 1) * per_path] = 1.0
    return new, kept

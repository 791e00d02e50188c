#!/usr/bin/python3
"""Trains dynamic networks on scikit-learn's digits and exports them for grove (paper 002).

    tools/dynamic/train_digits.py --out DIR [--epochs 20] [--width-mult 1] [--quick]

Writes to DIR:
  uniform.onnx      one model, sub-nets at width 0.25/0.5/0.75/1.0, fused training with
                    knowledge distillation from an individually trained full net;
  nonuniform.onnx   one model, sub-nets with per-layer widths learned by clipped group Lasso
                    (multi-path: one Lasso run per sub-net; single-path: sub-nets taken at
                    epochs of one run), then fused training;
  report.json       accuracy of every sub-net, dynamic vs trained alone (Tables 1 and 3);
  test_input.npy, <model>.<subnet>.logits.npy   PyTorch's outputs of each sub-net for one
                    test image, for checking grove against them.

Everything is seeded; on 2 cores the full run takes minutes (--quick: seconds, for tests).
"""
import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

sys.path.insert(0, str(Path(__file__).resolve().parent))
import export_onnx  # noqa: E402
from slimmable import SlimNet, kept, load_digits_split  # noqa: E402

RATIOS = [0.25, 0.5, 0.75, 1.0]


def batches(x, y, size, gen):
    order = torch.randperm(len(y), generator=gen)
    for i in range(0, len(y), size):
        j = order[i:i + size]
        yield x[j], y[j]


def accuracy(net, subnet, data):
    net.eval()
    with torch.no_grad():
        return (net(data[0], subnet).argmax(1) == data[1]).float().mean().item()


def train(net, train_data, epochs, seed, subnets=None, teacher=None, penalty=None, on_epoch=None, lr=2e-3):
    """Fused training (eq. 5): every listed sub-net runs forward and backward on each batch
    and the summed gradients update the shared weights once. With a teacher, narrower
    sub-nets also learn its softened outputs (knowledge distillation)."""
    subnets = list(range(len(net.subnets))) if subnets is None else subnets
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, max(epochs, 1))
    for epoch in range(epochs):
        net.train()
        for x, y in batches(*train_data, 64, gen):
            opt.zero_grad()
            soft = None
            if teacher is not None:
                with torch.no_grad():
                    soft = F.softmax(teacher(x, len(teacher.subnets) - 1) / 4.0, 1)
            loss = 0.0
            for s in subnets:
                out = net(x, s)
                loss = loss + F.cross_entropy(out, y)
                if soft is not None and net.subnets[s] != net.widths:
                    loss = loss + 16.0 * F.kl_div(F.log_softmax(out / 4.0, 1), soft, reduction="batchmean")
            if penalty is not None:
                loss = loss + penalty(net)
            loss.backward()
            opt.step()
        sched.step()
        if on_epoch:
            on_epoch(epoch)


def clipped_group_lasso(lam, beta):
    """Eq. 2: lambda x sum over output channels of min(||W_c||, tau), tau = beta x mean ||W_c||
    per layer: only channels weaker than the clip are pushed further toward zero."""
    def penalty(net):
        total = 0.0
        for _, w in net.channel_groups():
            norms = w.flatten(1).norm(dim=1)
            tau = beta * norms.mean().detach()
            total = total + torch.minimum(norms, tau).sum()
        return lam * total
    return penalty


def surviving_channels(net, min_gap=1.15):
    """Per-layer counts of the channels the Lasso left standing (the first conv is exempt).
    The clipped penalty splits a layer's channel norms into a weak and a strong group; the
    strong ones are those above the widest ratio between neighbouring sorted norms, when that
    ratio reaches `min_gap` (else the layer keeps every channel)."""
    counts = [net.widths[0]]
    for _, w in net.channel_groups():
        norms = w.detach().flatten(1).norm(dim=1).sort().values
        ratios = norms[1:] / norms[:-1].clamp_min(1e-12)
        cut = int(ratios.argmax())
        counts.append(len(norms) - cut - 1 if float(ratios[cut]) >= min_gap else len(norms))
    return counts


def order_channels_by_norm(net):
    """Permutes every prunable layer's output channels, strongest first (and the next layer's
    input channels to match), so each non-uniform sub-net keeps a prefix: the function of
    the full net is unchanged."""
    for i, w in net.channel_groups():
        order = w.detach().flatten(1).norm(dim=1).argsort(descending=True)
        with torch.no_grad():
            w.copy_(w[order])
            if i + 1 < len(net.convs):
                net.convs[i + 1].copy_(net.convs[i + 1][:, order])
            else:
                net.fc.weight.copy_(net.fc.weight[:, order])


def save_reference_outputs(net, names, prefix, image, out_dir):
    net.eval()
    with torch.no_grad():
        for i, name in enumerate(names):
            np.save(out_dir / f"{prefix}.{name}.logits.npy", net(image, i).numpy().astype(np.float32))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--width-mult", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="tiny widths, one epoch: for tests")
    args = ap.parse_args()
    if args.quick:
        args.epochs, args.width_mult = 1, 0.125
    torch.manual_seed(args.seed)
    torch.set_num_threads(2)
    args.out.mkdir(parents=True, exist_ok=True)
    train_data, test_data = load_digits_split(args.seed)
    report = {"epochs": args.epochs, "width_mult": args.width_mult, "train": len(train_data[1]),
              "test": len(test_data[1])}
    t0 = time.time()

    def say(text):
        print(f"[{time.time() - t0:6.1f} s] {text}", flush=True)

    full = [max(4, int(c * args.width_mult)) for c in (64, 128, 128, 256, 256)]
    uniform = [[full[0]] + [kept(r, w) for w in full[1:]] for r in RATIOS]
    names = [f"w{int(r * 100)}" for r in RATIOS]

    # Each width trained alone: the baseline column, and the full one is the teacher.
    alone = {}
    teacher = None
    for r, counts, name in zip(RATIOS, uniform, names):
        torch.manual_seed(args.seed)
        net = SlimNet(args.width_mult, [counts] if counts == full else [full, counts])
        idx = len(net.subnets) - 1 if counts == full else 1
        train(net, train_data, args.epochs, args.seed, subnets=[idx])
        alone[name] = accuracy(net, idx, test_data)
        say(f"alone {name}: {alone[name]:.4f}")
        if counts == full:
            teacher = net
    teacher.eval()

    # Uniform dynamic net: fused training with distillation.
    torch.manual_seed(args.seed)
    dyn = SlimNet(args.width_mult, uniform)
    train(dyn, train_data, args.epochs, args.seed, teacher=teacher)
    dyn_acc = {n: accuracy(dyn, i, test_data) for i, n in enumerate(names)}
    say("uniform dynamic: " + ", ".join(f"{n} {a:.4f}" for n, a in dyn_acc.items()))
    export_onnx.export(dyn, names, [dyn_acc[n] for n in names], str(args.out / "uniform.onnx"), len(names) - 1)
    image = test_data[0][:1]
    np.save(args.out / "test_input.npy", image.numpy().astype(np.float32))
    save_reference_outputs(dyn, names, "uniform", image, args.out)
    report["uniform"] = {"subnets": {n: {"channels": c, "dynamic": dyn_acc[n], "alone": alone[n]}
                                     for n, c in zip(names, uniform)}}

    # Non-uniform: clipped group Lasso from the trained full net. Multi-path: one run per
    # lambda; single-path: one run, sub-nets read at two epochs.
    # beta sets the share of channels under the clip (tau = beta x mean norm), so each path's
    # beta gives a different sub-net size (docs/dynamic.md has the sweep behind these values).
    found = {}
    for beta in (0.95, 1.03):
        torch.manual_seed(args.seed)
        net = SlimNet(args.width_mult, [full])
        net.load_state_dict(teacher.state_dict())
        train(net, train_data, args.epochs, args.seed, penalty=clipped_group_lasso(1e-2, beta), lr=1e-3)
        found[f"mp{len(found) + 1}"] = surviving_channels(net)
    # Single path: a weaker penalty prunes the deep layers first, then the shallow ones.
    torch.manual_seed(args.seed)
    single = SlimNet(args.width_mult, [full])
    single.load_state_dict(teacher.state_dict())
    picks = {max(args.epochs // 2 - 1, 0): "sp1", args.epochs - 1: "sp2"}
    train(single, train_data, args.epochs, args.seed, penalty=clipped_group_lasso(3e-3, 1.0), lr=1e-3,
          on_epoch=lambda e: found.__setitem__(picks[e], surviving_channels(single)) if e in picks else None)
    if args.quick:
        # Nothing is pruned in one epoch: one hand-set non-uniform sub-net so tests see
        # layers cut to different fractions.
        found["hand"] = [full[0], full[1] // 2, full[2] // 4, full[3], full[4] // 2]
    say("non-uniform channels: " + "; ".join(f"{n} {c}" for n, c in found.items()))
    # Fused training of the non-uniform sub-nets plus the full net, channels ordered by the
    # importance the teacher gives them so every sub-net is a prefix.
    # A sub-net equal to another (or to the full net) is dropped: the metadata names each once.
    unique = {}
    for n, c in found.items():
        if c != full and c not in unique.values():
            unique[n] = c
    found = unique
    nu_names = sorted(found, key=lambda n: sum(found[n])) + ["full"]
    nu_counts = [found[n] for n in nu_names[:-1]] + [full]
    torch.manual_seed(args.seed)
    nu = SlimNet(args.width_mult, nu_counts)
    with torch.no_grad():
        for (_, w), (_, t) in zip(nu.channel_groups(), teacher.channel_groups()):
            w.copy_(t)
        nu.convs[0].copy_(teacher.convs[0])
        nu.fc.load_state_dict(teacher.fc.state_dict())
    order_channels_by_norm(nu)
    train(nu, train_data, args.epochs, args.seed, teacher=teacher)
    nu_acc = {n: accuracy(nu, i, test_data) for i, n in enumerate(nu_names)}
    nu_alone = {}
    for n, counts in zip(nu_names, nu_counts):
        torch.manual_seed(args.seed)
        net = SlimNet(args.width_mult, [full, counts] if counts != full else [full])
        i = len(net.subnets) - 1
        train(net, train_data, args.epochs, args.seed, subnets=[i])
        nu_alone[n] = accuracy(net, i, test_data)
    say("non-uniform dynamic: " + ", ".join(f"{n} {a:.4f} (alone {nu_alone[n]:.4f})" for n, a in nu_acc.items()))
    export_onnx.export(nu, nu_names, [nu_acc[n] for n in nu_names], str(args.out / "nonuniform.onnx"), len(nu_names) - 1)
    save_reference_outputs(nu, nu_names, "nonuniform", image, args.out)
    report["nonuniform"] = {"subnets": {n: {"channels": c, "dynamic": nu_acc[n], "alone": nu_alone[n]}
                                        for n, c in zip(nu_names, nu_counts)}}
    report["seconds"] = round(time.time() - t0, 1)
    (args.out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    say(f"wrote {args.out}/uniform.onnx, nonuniform.onnx, report.json")


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Trains a CNN on scikit-learn's digits for dynamic feature-map pruning (Antidote) and exports it.

    tools/dynamic/train_antidote.py --out DIR [--epochs 20] [--ttd-epochs 16] [--quick]

Steps (thesis 004, ch. 3.1):
  1. train the plain network;
  2. layer sensitivity: prune one feature map at a time (channels, then positions) at
     several keep ratios, without retraining, and take as each map's bound the lowest ratio
     that loses at most 5 points;
  3. training with targeted dropout (TTD): fine-tune with the attention masks on, the
     dropped share rising step by step (dropout ratio ascent) to the bounds;
  4. accuracy vs FLOPs for several keep settings, before and after TTD.

Writes to DIR:
  antidote.onnx   the fine-tuned network, unpruned as ONNX (any runtime runs it), with the
                  chosen setting (the fewest FLOPs within 1 point of the plain network) as
                  grove.antidote metadata;
  plain.onnx      the network of step 1, no metadata;
  report.json     the sensitivity table and the settings' accuracies and FLOPs;
  settings.json   each setting's grove.antidote text;
  test_input.npy, antidote.<setting>.logits.npy   PyTorch's logits of 8 test images per
                  setting, for checking grove against them.

Seeded; the full run takes a few minutes on 2 cores (--quick: seconds, for tests).
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
import antidote  # noqa: E402
from antidote import PRUNABLE, PlainNet  # noqa: E402
from slimmable import load_digits_split  # noqa: E402

RATIOS = [0.75, 0.5, 0.375, 0.25, 0.125]


def accuracy(net, data, keep=None):
    net.eval()
    with torch.no_grad():
        return (net(data[0], keep).argmax(1) == data[1]).float().mean().item()


def fit(net, data, epochs, seed, keep_at=None, lr=2e-3):
    """Adam with cosine decay; keep_at(epoch) gives the masks of that epoch (TTD) or None."""
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, max(epochs, 1))
    x, y = data
    for epoch in range(epochs):
        net.train()
        keep = keep_at(epoch) if keep_at else None
        order = torch.randperm(len(y), generator=gen)
        for i in range(0, len(y), 64):
            j = order[i:i + 64]
            opt.zero_grad()
            F.cross_entropy(net(x[j], keep), y[j]).backward()
            opt.step()
        sched.step()


def one_map(layer, pc=1.0, ps=1.0):
    return [(pc, ps) if i == layer else None for i in range(PRUNABLE)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--epochs", type=int, default=20)
    ap.add_argument("--ttd-epochs", type=int, default=16)
    ap.add_argument("--width-mult", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="tiny widths, few epochs: for tests")
    args = ap.parse_args()
    if args.quick:
        args.epochs, args.ttd_epochs, args.width_mult = 2, 2, 0.125
    args.out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(args.seed)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    start = time.time()

    def say(text):
        print(f"[{time.time() - start:6.1f}s] {text}", flush=True)

    train_data, test_data = load_digits_split(args.seed)
    net = PlainNet(args.width_mult)
    fit(net, train_data, args.epochs, args.seed)
    base = accuracy(net, test_data)
    say(f"plain network: {base:.4f} on {len(test_data[1])} held-out images")
    antidote.export(net, str(args.out / "plain.onnx"), None, batch="N")

    # Layer sensitivity, without retraining.
    sensitivity, bounds = [], []
    for layer in range(PRUNABLE):
        row = {"map": antidote.value_name(layer), "channels": {}, "positions": {}}
        for kind in ("channels", "positions"):
            for r in RATIOS:
                keep = one_map(layer, pc=r) if kind == "channels" else one_map(layer, ps=r)
                row[kind][str(r)] = accuracy(net, test_data, keep)
        ok = lambda kind: min([r for r in RATIOS if row[kind][str(r)] >= base - 0.05] + [1.0])  # noqa: E731
        bounds.append((ok("channels"), ok("positions")))
        sensitivity.append(row)
        say(f"sensitivity {row['map']}: channels {row['channels']}, positions {row['positions']}")
    say(f"bounds (channels, positions) per map: {bounds}")

    settings = {
        "none": None,
        "c75": [(0.75, 1.0)] * PRUNABLE,
        "c50": [(0.5, 1.0)] * PRUNABLE,
        "c375": [(0.375, 1.0)] * PRUNABLE,
        "c25": [(0.25, 1.0)] * PRUNABLE,
        "c50p75": [(0.5, 0.75)] * PRUNABLE,
        "bounds": bounds,
    }
    before = {name: accuracy(net, test_data, keep) for name, keep in settings.items()}

    # Targeted dropout: the dropped share rises by 0.05 steps to each setting's target over
    # the first 60% of the epochs; each batch is trained at one of the settings in turn.
    targets = [k for k in settings.values() if k]

    def ascent(epoch):
        t = min(1.0, (epoch + 1) / max(1.0, 0.6 * args.ttd_epochs))
        step = lambda r: 1.0 - round((1.0 - r) * t / 0.05) * 0.05  # noqa: E731
        target = targets[epoch % len(targets)]
        return [(max(pc, step(pc)), max(ps, step(ps))) for pc, ps in target]

    fit(net, train_data, args.ttd_epochs, args.seed + 1, keep_at=ascent, lr=1e-3)
    after = {name: accuracy(net, test_data, keep) for name, keep in settings.items()}
    flops = {name: net.flops(keep) for name, keep in settings.items()}
    for name in settings:
        say(f"{name:7s} FLOPs {flops[name] / 1e6:6.2f} M ({flops[name] / flops['none']:.2f})  "
            f"accuracy before TTD {before[name]:.4f}, after {after[name]:.4f}")

    within = [n for n in settings if settings[n] and after[n] >= base - 0.01]
    chosen = min(within, key=lambda n: flops[n]) if within else "c75"
    say(f"chosen for the model's metadata: {chosen}")
    antidote.export(net, str(args.out / "antidote.onnx"), settings[chosen], batch="N")

    x = test_data[0][:8]
    np.save(args.out / "test_input.npy", x.numpy())
    net.eval()
    with torch.no_grad():
        for name, keep in settings.items():
            np.save(args.out / f"antidote.{name}.logits.npy", net(x, keep).numpy())
    (args.out / "settings.json").write_text(json.dumps({n: antidote.metadata(k) for n, k in settings.items()}, indent=1))
    report = {"plain_accuracy": base, "test_images": len(test_data[1]), "train_images": len(train_data[1]),
              "sensitivity": sensitivity, "bounds": bounds, "chosen": chosen,
              "settings": {n: {"flops": flops[n], "accuracy_before_ttd": before[n], "accuracy_after_ttd": after[n],
                               "metadata": antidote.metadata(settings[n])} for n in settings},
              "seconds": time.time() - start}
    (args.out / "report.json").write_text(json.dumps(report, indent=1))
    say(f"wrote {args.out}")


if __name__ == "__main__":
    main()

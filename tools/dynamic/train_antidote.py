#!/usr/bin/python3
"""Trains a CNN on Fashion-MNIST for dynamic feature-map pruning (Antidote) and exports it.

    tools/dynamic/train_antidote.py --out DIR [--epochs 4] [--ttd-epochs 2] [--quick]

Steps (thesis 004, ch. 3.1):
  1. train the plain network;
  2. layer sensitivity: prune one feature map at a time (channels, then positions) at
     several keep ratios, without retraining, and take as each map's bound the lowest ratio
     that loses at most 10 points;
  3. training with targeted dropout (TTD), one network per keep setting (channels only,
     positions only, both): fine-tune with the attention masks on, the dropped share rising
     step by step (dropout ratio ascent), and the plain network's softened outputs as a
     second target (distillation);
  4. accuracy vs FLOPs per setting, pruning the plain network and the TTD one.

Writes to DIR:
  antidote.onnx   the network fine-tuned for the chosen setting (the fewest FLOPs within 1
                  point of the plain network), unpruned as ONNX (any runtime runs it), with
                  that setting as grove.antidote metadata;
  plain.onnx      the network of step 1, no metadata;
  NAME.onnx       the network fine-tuned for each setting, with it as metadata;
  report.json     the sensitivity table and the settings' accuracies and FLOPs;
  settings.json   each setting's grove.antidote text;
  test_input.npy, antidote.<setting>.logits.npy   PyTorch's logits of 8 test images per
                  setting (the chosen network), for checking grove against them.

Seeded; the full run takes about 15 minutes on 2 cores (--quick: seconds, for tests).
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
from datasets import load_fashion_mnist  # noqa: E402

RATIOS = [0.75, 0.5, 0.25]


def accuracy(net, data, keep=None, batch=1000):
    net.eval()
    right = 0
    with torch.no_grad():
        for i in range(0, len(data[1]), batch):
            right += (net(data[0][i:i + batch], keep).argmax(1) == data[1][i:i + batch]).sum().item()
    return right / len(data[1])


def fit(net, data, epochs, seed, keep_at=None, lr=2e-3, teacher=None):
    """Adam with cosine decay; keep_at(epoch) gives the masks of that epoch (TTD) or None.
    With a teacher, the pruned network also learns its softened outputs (distillation)."""
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    sched = torch.optim.lr_scheduler.CosineAnnealingLR(opt, max(epochs, 1))
    x, y = data
    for epoch in range(epochs):
        net.train()
        keep = keep_at(epoch) if keep_at else None
        order = torch.randperm(len(y), generator=gen)
        for i in range(0, len(y), 128):
            j = order[i:i + 128]
            opt.zero_grad()
            out = net(x[j], keep)
            loss = F.cross_entropy(out, y[j])
            if teacher is not None:
                with torch.no_grad():
                    soft = F.softmax(teacher(x[j]) / 4.0, 1)
                loss = loss + 16.0 * F.kl_div(F.log_softmax(out / 4.0, 1), soft, reduction="batchmean")
            loss.backward()
            opt.step()
        sched.step()


def one_map(layer, pc=1.0, ps=1.0):
    return [(pc, ps) if i == layer else None for i in range(PRUNABLE)]


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--epochs", type=int, default=4)
    ap.add_argument("--ttd-epochs", type=int, default=2)
    ap.add_argument("--train-limit", type=int, default=60000, help="training images (the file's first)")
    ap.add_argument("--width-mult", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="tiny widths, few epochs: for tests")
    ap.add_argument("--settings", help="only these keep settings, comma-separated (default: all)")
    args = ap.parse_args()
    if args.quick:
        args.epochs, args.ttd_epochs, args.width_mult, args.train_limit = 2, 1, 0.25, 2000
    args.out.mkdir(parents=True, exist_ok=True)
    torch.manual_seed(args.seed)
    torch.set_num_threads(max(1, torch.get_num_threads()))
    start = time.time()

    def say(text):
        print(f"[{time.time() - start:6.1f}s] {text}", flush=True)

    train_data, test_data = load_fashion_mnist(args.train_limit, 500 if args.quick else None)
    # The sensitivity sweep (24 evaluations) runs on the first 2,000 test images.
    probe = (test_data[0][:2000], test_data[1][:2000])
    net = PlainNet(args.width_mult)
    fit(net, train_data, args.epochs, args.seed)
    base = accuracy(net, test_data)
    base_probe = accuracy(net, probe)
    say(f"plain network: {base:.4f} on {len(test_data[1])} test images")
    antidote.export(net, str(args.out / "plain.onnx"), None, batch="N")

    # Layer sensitivity, without retraining.
    sensitivity, bounds = [], []
    for layer in range(PRUNABLE):
        row = {"map": antidote.value_name(layer), "channels": {}, "positions": {}}
        for kind in ("channels", "positions"):
            for r in RATIOS:
                keep = one_map(layer, pc=r) if kind == "channels" else one_map(layer, ps=r)
                row[kind][str(r)] = accuracy(net, probe, keep)
        ok = lambda kind: min([r for r in RATIOS if row[kind][str(r)] >= base_probe - 0.10] + [1.0])  # noqa: E731
        bounds.append((ok("channels"), ok("positions")))
        sensitivity.append(row)
        say(f"sensitivity {row['map']}: channels {row['channels']}, positions {row['positions']}")
    say(f"bounds (channels, positions) per map: {bounds}")

    # Settings: channels only, positions only, and both, on every map but the first (the most
    # sensitive one, and its consumer's input is the widest plane).
    def every_map_but_the_first(pc, ps, block=1):
        return [None] + [(pc, ps, block)] * (PRUNABLE - 1)

    settings = {
        "c75": every_map_but_the_first(0.75, 1.0),
        "c50": every_map_but_the_first(0.5, 1.0),
        "p50": every_map_but_the_first(1.0, 0.5),
        "c75p75": every_map_but_the_first(0.75, 0.75),
        "c50p50": every_map_but_the_first(0.5, 0.5),
        # Positions kept in blocks of 4 x 4, the output blocks of Winograd F(4x4, 3x3): a pruned
        # conv on Winograd skips the others whole.
        "p50b4": every_map_but_the_first(1.0, 0.5, 4),
        "c50p50b4": every_map_but_the_first(0.5, 0.5, 4),
    }
    # Each setting's seed is its place in the full list, so --settings trains it as the full run does.
    seeds = {name: args.seed + 1 + i for i, name in enumerate(settings)}
    if args.settings:
        unknown = [n for n in args.settings.split(",") if n not in settings]
        if unknown:
            sys.exit(f"unknown settings {unknown}; the kit has {list(settings)}")
        settings = {n: settings[n] for n in args.settings.split(",")}
    before = {name: accuracy(net, test_data, keep) for name, keep in settings.items()}
    flops = {name: net.flops(keep) for name, keep in settings.items()}
    flops["none"] = net.flops()
    plain_state = {k: v.clone() for k, v in net.state_dict().items()}
    teacher = PlainNet(args.width_mult)
    teacher.load_state_dict(plain_state)
    teacher.eval()

    # Targeted dropout, one network per setting (BatchNorm learns the statistics of the pruned
    # maps): the dropped share rises by 0.05 steps to the setting over the first 60% of the
    # epochs (dropout ratio ascent), then stays.
    def ascent_to(target):
        def keep_at(epoch):
            t = min(1.0, (epoch + 1) / max(1.0, 0.6 * args.ttd_epochs))
            step = lambda r: 1.0 - round((1.0 - r) * t / 0.05) * 0.05  # noqa: E731
            return [None if k is None else (max(k[0], step(k[0])), max(k[1], step(k[1])), *k[2:]) for k in target]
        return keep_at

    after, states = {}, {}
    for name, keep in settings.items():
        net.load_state_dict(plain_state)
        fit(net, train_data, args.ttd_epochs, seeds[name], keep_at=ascent_to(keep), teacher=teacher)
        after[name] = accuracy(net, test_data, keep)
        states[name] = {k: v.clone() for k, v in net.state_dict().items()}
        antidote.export(net, str(args.out / f"{name}.onnx"), keep, batch="N")
        say(f"{name:11s} FLOPs {flops[name] / 1e6:6.2f} M ({flops[name] / flops['none']:.2f})  "
            f"accuracy pruned: {before[name]:.4f} as trained plain, {after[name]:.4f} after targeted dropout")

    within = [n for n in settings if after[n] >= base - 0.01]
    chosen = min(within, key=lambda n: flops[n]) if within else max(settings, key=lambda n: after[n])
    say(f"chosen for the model's metadata: {chosen} ({after[chosen]:.4f}, plain {base:.4f})")
    net.load_state_dict(states[chosen])
    antidote.export(net, str(args.out / "antidote.onnx"), settings[chosen], batch="N")
    settings = {"none": None, **settings}

    x = test_data[0][:8]
    np.save(args.out / "test_input.npy", x.numpy())
    net.eval()
    with torch.no_grad():
        for name, keep in settings.items():
            np.save(args.out / f"antidote.{name}.logits.npy", net(x, keep).numpy())
    (args.out / "settings.json").write_text(json.dumps({n: antidote.metadata(k) for n, k in settings.items()}, indent=1))
    report = {"plain_accuracy": base, "test_images": len(test_data[1]), "train_images": len(train_data[1]),
              "sensitivity": sensitivity, "bounds": bounds, "chosen": chosen,
              "settings": {n: {"flops": flops[n], "accuracy_plain": before.get(n, base),
                               "accuracy_ttd": after.get(n), "metadata": antidote.metadata(settings[n])} for n in settings},
              "seconds": time.time() - start}
    (args.out / "report.json").write_text(json.dumps(report, indent=1))
    say(f"wrote {args.out}")


if __name__ == "__main__":
    main()

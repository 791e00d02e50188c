#!/usr/bin/python3
"""Trains a dynamic network on Fashion-MNIST and exports it for grove (paper 002).

    tools/dynamic/train_fashion.py --out DIR [--epochs 6] [--train-limit 60000] [--quick]

One set of weights, four uniform sub-nets (widths 0.25, 0.5, 0.75, 1.0 of every conv but the
first), trained jointly by the sandwich rule with in-place distillation: every batch runs the
widest sub-net on the labels, and the narrower ones (the narrowest always, as the rule's lower
bread, and the widths between) on the widest one's own predictions, which guide them better
than the labels alone and cost no separate teacher.

Writes to DIR:
  fashion.onnx      the model with grove.subnets metadata (each sub-net's test accuracy);
  report.json       the accuracy of each sub-net on the 10,000 test images, and the run's time;
  test_input.npy, fashion.<subnet>.logits.npy   PyTorch's outputs of each sub-net for 8 test
                    images, for checking grove against them.

Everything is seeded. On 2 cores the default run takes about 10 minutes; --quick (seconds,
for tests) trains one epoch on 2,000 images at a quarter of the widths.
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
from datasets import load_fashion_mnist  # noqa: E402
from slimmable import SlimNet, kept  # noqa: E402

RATIOS = [0.25, 0.5, 0.75, 1.0]
# (output channels, stride) of the five 3x3 convs at width multiplier 1, for 28x28 images.
LAYERS = [(32, 1), (64, 2), (64, 1), (128, 2), (128, 1)]
IMAGE = 28


def batches(x, y, size, gen):
    order = torch.randperm(len(y), generator=gen)
    for i in range(0, len(y), size):
        j = order[i:i + size]
        yield x[j], y[j]


def accuracy(net, subnet, data, batch=1000):
    net.eval()
    right = 0
    with torch.no_grad():
        for i in range(0, len(data[1]), batch):
            right += int((net(data[0][i:i + batch], subnet).argmax(1) == data[1][i:i + batch]).sum())
    return right / len(data[1])


def train_sandwich(net, train_data, epochs, seed, say, lr=3e-3):
    """The sandwich rule with in-place distillation: the widest sub-net learns the labels; the
    others learn its predictions (soft targets, detached), and all their gradients update the
    shared weights once per batch."""
    widest = len(net.subnets) - 1
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    steps = epochs * ((len(train_data[1]) + 127) // 128)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=max(steps, 1))
    for epoch in range(epochs):
        net.train()
        seen, loss_sum = 0, 0.0
        for x, y in batches(*train_data, 128, gen):
            opt.zero_grad()
            out = net(x, widest)
            loss = F.cross_entropy(out, y)
            soft = F.softmax(out.detach(), 1)
            for s in range(widest):  # narrowest first: the sandwich's lower bread, then the filling
                loss = loss + F.kl_div(F.log_softmax(net(x, s), 1), soft, reduction="batchmean")
            loss.backward()
            opt.step()
            sched.step()
            seen += len(y)
            loss_sum += float(loss) * len(y)
        say(f"epoch {epoch + 1}/{epochs}: loss {loss_sum / max(seen, 1):.4f}")


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--epochs", type=int, default=6)
    ap.add_argument("--train-limit", type=int, default=60000, help="training images used (of 60,000)")
    ap.add_argument("--width-mult", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="2,000 images, one epoch, a quarter of the widths: for tests")
    args = ap.parse_args()
    if args.quick:
        args.epochs, args.train_limit, args.width_mult = 1, 2000, 0.25
    torch.manual_seed(args.seed)
    torch.set_num_threads(2)
    args.out.mkdir(parents=True, exist_ok=True)
    train_data, test_data = load_fashion_mnist(args.train_limit, 2000 if args.quick else None)
    t0 = time.time()

    def say(text):
        print(f"[{time.time() - t0:6.1f} s] {text}", flush=True)

    full = [max(4, int(c * args.width_mult)) for c, _ in LAYERS]
    subnets = [[full[0]] + [kept(r, w) for w in full[1:]] for r in RATIOS]
    names = [f"w{int(r * 100)}" for r in RATIOS]
    net = SlimNet(args.width_mult, subnets, layers=LAYERS, image=IMAGE)
    train_sandwich(net, train_data, args.epochs, args.seed, say)
    acc = {n: accuracy(net, i, test_data) for i, n in enumerate(names)}
    say("test accuracy: " + ", ".join(f"{n} {a:.4f}" for n, a in acc.items()))

    export_onnx.export(net, names, [acc[n] for n in names], str(args.out / "fashion.onnx"), len(names) - 1,
                       batch="N", graph_name="slimnet_fashion")
    images = test_data[0][:8]
    np.save(args.out / "test_input.npy", images.numpy().astype(np.float32))
    net.eval()
    with torch.no_grad():
        for i, n in enumerate(names):
            np.save(args.out / f"fashion.{n}.logits.npy", net(images, i).numpy().astype(np.float32))
    report = {"dataset": "Fashion-MNIST", "train": len(train_data[1]), "test": len(test_data[1]), "epochs": args.epochs,
              "width_mult": args.width_mult, "seed": args.seed,
              "subnets": {n: {"channels": c, "accuracy": acc[n]} for n, c in zip(names, subnets)},
              "seconds": round(time.time() - t0, 1)}
    (args.out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    say(f"wrote {args.out}/fashion.onnx and report.json")


if __name__ == "__main__":
    main()

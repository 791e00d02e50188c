#!/usr/bin/python3
"""DCCNN end to end on Fashion-MNIST (thesis 004, 3.2): trains a CNN, decouples its later
layers into class-specific paths by connection pruning, searches the decoupling depth and the
filter ratio, retrains, and exports both networks for grove.

    tools/dccnn/train_dccnn.py --out DIR [--paths 2] [--quick]

Steps (each printed with the time it took):
  1. the plain network (tools/dccnn/pathnet.py, six 3x3 convs 32..256 channels) trained on
     55,000 training images; the last 5,000 are held out for the search;
  2. every filter's class-specific index, the classes split into --paths groups
     (tools/dccnn/decouple.py);
  3. the search: for each decoupling depth D (--depths) and filter ratio (--ratios, per path,
     as a fraction of 1/paths of the layer: 1 keeps every filter), the decoupled network is
     made from the trained one, retrained briefly and scored on the held-out images; the
     candidate with the fewest FLOPs within --tolerance points of the plain network's held-out
     accuracy wins (the thesis's line searches over depth and ratio, then retraining);
  4. the winner retrained on the whole training set, then both networks scored on the 10,000
     test images.

Writes to DIR:
  plain.onnx, decoupled.onnx   symbolic batch, input `image` [N, 1, 28, 28], output `logits`;
                               the decoupled convs after the first are grouped (group = paths),
                               the chains grove's planner cuts path by path (docs/dccnn.md)
  report.json                  accuracies, FLOPs, the class groups, the search table, the time
  test_input.npy, plain.logits.npy, decoupled.logits.npy   8 test images and PyTorch's logits
  candidates/dD_rR.onnx        each searched candidate after its brief retraining (for timing)

Seeded; on 2 cores the default run takes about 12 minutes; --quick (seconds, for tests) uses
2,000 images at a quarter of the widths and two candidates. --plain-only stops after step 1
(plain.onnx, report.json and the test images' logits).
"""
import argparse
import json
import sys
import time
from pathlib import Path

import numpy as np
import torch
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "dynamic"))
import decouple  # noqa: E402
import pathnet  # noqa: E402
from datasets import FASHION_CLASSES, accuracy, load_fashion_mnist  # noqa: E402


def train(net, data, epochs, seed, lr, say=None):
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam(net.parameters(), lr=lr)
    steps = epochs * ((len(data[1]) + 127) // 128)
    sched = torch.optim.lr_scheduler.OneCycleLR(opt, max_lr=lr, total_steps=max(steps, 1))
    for epoch in range(epochs):
        net.train()
        order = torch.randperm(len(data[1]), generator=gen)
        total = 0.0
        for i in range(0, len(order), 128):
            j = order[i:i + 128]
            opt.zero_grad()
            loss = F.cross_entropy(net(data[0][j]), data[1][j])
            loss.backward()
            opt.step()
            sched.step()
            total += float(loss) * len(j)
        if say:
            say(f"epoch {epoch + 1}/{epochs}: loss {total / len(order):.4f}")


def int_list(text):
    out = []
    for part in text.split(","):
        lo, _, hi = part.partition("-")
        out += list(range(int(lo), int(hi or lo) + 1))
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--paths", type=int, default=2, help="class-specific paths (group count of the decoupled convs)")
    ap.add_argument("--depths", default="1-6", help="decoupling depths searched, e.g. 1-6 or 2,4")
    ap.add_argument("--ratios", default="1,0.75,0.5",
                    help="filter ratios searched, per path, as fractions of 1/paths of a layer (1: keep every filter)")
    ap.add_argument("--tolerance", type=float, default=1.0, help="accuracy points a candidate may lose on held-out images")
    ap.add_argument("--epochs", type=int, default=4, help="epochs of the plain network")
    ap.add_argument("--search-images", type=int, default=12800, help="training images each candidate is retrained on")
    ap.add_argument("--retrain-epochs", type=int, default=3, help="epochs of the winner's retraining")
    ap.add_argument("--train-limit", type=int, default=60000)
    ap.add_argument("--width-mult", type=float, default=1.0)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="2,000 images, a quarter of the widths, two candidates")
    ap.add_argument("--plain-only", action="store_true",
                    help="stop after step 1: write plain.onnx and its test accuracy (what tools/tail/ starts from)")
    args = ap.parse_args()
    if args.quick:
        args.epochs, args.retrain_epochs, args.train_limit, args.width_mult = 2, 1, 2500, 0.25
        args.search_images, args.depths, args.ratios = 1000, "3,4", "1"
    torch.manual_seed(args.seed)
    torch.set_num_threads(2)
    args.out.mkdir(parents=True, exist_ok=True)
    t0 = time.time()

    def say(text):
        print(f"[{time.time() - t0:6.1f} s] {text}", flush=True)

    (x, y), test = load_fashion_mnist(args.train_limit, 2000 if args.quick else None)
    held = max(500, len(y) // 12)
    train_data, val = (x[:-held], y[:-held]), (x[-held:], y[-held:])
    search_data = (train_data[0][:args.search_images], train_data[1][:args.search_images])

    net = pathnet.plain(args.width_mult)
    say(f"1. plain network {net.widths}: {args.epochs} epochs on {len(train_data[1])} images")
    train(net, train_data, args.epochs, args.seed, 3e-3, say)
    plain_val = accuracy(net, val)
    say(f"   held-out accuracy {plain_val:.4f}")
    if args.plain_only:
        acc_plain = accuracy(net, test)
        say(f"   test accuracy {acc_plain:.4f}")
        pathnet.export(net, args.out / "plain.onnx")
        images = test[0][:8]
        np.save(args.out / "test_input.npy", images.numpy().astype(np.float32))
        with torch.no_grad():
            np.save(args.out / "plain.logits.npy", net(images).numpy().astype(np.float32))
        report = {"dataset": "Fashion-MNIST", "train": len(train_data[1]), "held_out": held, "test": len(test[1]),
                  "seed": args.seed, "epochs": args.epochs,
                  "plain": {"widths": net.widths, "flops": sum(pathnet.conv_flops(net)), "accuracy": acc_plain,
                            "held_out": plain_val}, "seconds": round(time.time() - t0, 1)}
        (args.out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
        say(f"wrote {args.out}/plain.onnx and report.json")
        return

    index = decouple.class_index(net, train_data[0][:5000], train_data[1][:5000])
    groups = decouple.group_classes(index[-1].numpy(), args.paths)
    say("2. class groups: " + " | ".join(", ".join(FASHION_CLASSES[c] for c in g) for g in groups))

    plain_flops = sum(pathnet.conv_flops(net))
    rows, candidates = [], {}
    for depth in int_list(args.depths):
        for ratio in (float(r) for r in args.ratios.split(",")):
            cand, _ = decouple.decouple(net, index, groups, depth, ratio / args.paths)
            before = accuracy(cand, val)
            train(cand, search_data, 1, args.seed + depth, 1e-3)
            row = {"depth": depth, "ratio": ratio, "flops": sum(pathnet.conv_flops(cand)),
                   "pruned_accuracy": before, "accuracy": accuracy(cand, val)}
            rows.append(row)
            candidates[(depth, ratio)] = cand
            (args.out / "candidates").mkdir(exist_ok=True)
            pathnet.export(cand, args.out / "candidates" / f"d{depth}_r{ratio:g}.onnx")
            say(f"3. depth {depth} ratio {ratio:g}: {row['flops'] / plain_flops:.2f} of the FLOPs, held-out "
                f"{before:.4f} pruned, {row['accuracy']:.4f} after {len(search_data[1])} images")
    good = [r for r in rows if r["accuracy"] >= plain_val - args.tolerance / 100]
    best = min(good, key=lambda r: (r["flops"], -r["accuracy"])) if good else max(rows, key=lambda r: r["accuracy"])
    dec = candidates[(best["depth"], best["ratio"])]
    say(f"4. retraining depth {best['depth']} ratio {best['ratio']:g} for {args.retrain_epochs} epochs")
    train(dec, train_data, args.retrain_epochs, args.seed + 100, 1e-3, say)
    acc_plain, acc_dec = accuracy(net, test), accuracy(dec, test)
    say(f"   test accuracy: plain {acc_plain:.4f}, decoupled {acc_dec:.4f}")

    pathnet.export(net, args.out / "plain.onnx")
    pathnet.export(dec, args.out / "decoupled.onnx")
    images = test[0][:8]
    np.save(args.out / "test_input.npy", images.numpy().astype(np.float32))
    with torch.no_grad():
        for name, model in (("plain", net), ("decoupled", dec)):
            np.save(args.out / f"{name}.logits.npy", model(images).numpy().astype(np.float32))
    report = {"dataset": "Fashion-MNIST", "train": len(train_data[1]), "held_out": held, "test": len(test[1]),
              "paths": args.paths, "seed": args.seed, "epochs": args.epochs, "retrain_epochs": args.retrain_epochs,
              "class_groups": [[FASHION_CLASSES[c] for c in g] for g in groups],
              "plain": {"widths": net.widths, "flops": plain_flops, "accuracy": acc_plain, "held_out": plain_val},
              "decoupled": {"widths": dec.widths, "groups": dec.groups, "depth": best["depth"], "ratio": best["ratio"],
                            "flops": sum(pathnet.conv_flops(dec)), "accuracy": acc_dec},
              "search": rows, "tolerance_points": args.tolerance, "seconds": round(time.time() - t0, 1)}
    (args.out / "report.json").write_text(json.dumps(report, indent=1) + "\n")
    say(f"wrote {args.out}/plain.onnx, decoupled.onnx and report.json")


if __name__ == "__main__":
    main()

#!/usr/bin/python3
"""Fine-tunes a Fashion-MNIST model whose layer widths `grove tail --apply` changed, and writes
it back as ONNX (TA-DNN's retraining step, docs/scaling.md).

    tools/tail/retrain.py --model applied.onnx --out retrained.onnx [--grove build/grove]
                          [--original plain.onnx] [--epochs 1] [--max-seconds 240] [--quick]

1. The applied ONNX becomes a PyTorch module of its new widths (tools/tail/onnx_net.py): its
   initializers are the parameters, its nodes the forward pass.
2. Before training: with --grove, grove's logits of the model on 8 test images must equal
   PyTorch's within 1e-4 (else exit 1); with --original, the largest difference between the
   applied and the original model's logits is reported (a grown model computes the same: its
   new channels' outgoing weights are zero; a pruned one does not).
3. Test accuracy before and after fine-tuning: Adam (--lr, warm-up then cosine decay) for
   --epochs over the 55,000 training images the DCCNN kit trains on, seeded; when the first
   steps show that would take over --max-seconds, over as many steps as fit instead.
4. Writes --out: the same graph with the trained weights, and OUT.json (accuracies, the
   checks, the time); with --grove, grove's logits of --out are checked against PyTorch's too.

--quick (seconds, for tests): 2,000 training and 2,000 test images, 30 steps at most.
"""
import argparse
import json
import subprocess
import sys
import tempfile
import time
from pathlib import Path

import numpy as np
import onnx
import torch
import torch.nn.functional as F

HERE = Path(__file__).resolve().parent
sys.path.insert(0, str(HERE))
sys.path.insert(0, str(HERE.parent / "dynamic"))
from datasets import accuracy, load_fashion_mnist  # noqa: E402
from onnx_net import OnnxNet  # noqa: E402


def grove_logits(grove, model, images):
    """grove's output of `model` on `images` (`grove run`, one .npy out)."""
    g = onnx.load(str(model)).graph
    weights = {t.name for t in g.initializer}
    net_input = [i.name for i in g.input if i.name not in weights][0]
    with tempfile.TemporaryDirectory() as d:
        np.save(Path(d) / "x.npy", images)
        subprocess.run([grove, "run", str(model), "--input", f"{net_input}={d}/x.npy", "--output", f"{d}/out"],
                       check=True, stdout=subprocess.DEVNULL)
        (out,) = list((Path(d) / "out").glob("*.npy"))
        return np.load(out)


def fine_tune(net, data, total, lr, seed, max_seconds, say):
    """Adam over `total` steps of 128 images, the learning rate warming up over the first 5%
    and falling to 0 on a cosine. When the first steps show that `total` would take longer
    than `max_seconds`, `total` shrinks to fit, so the schedule still ends at 0. Returns the
    steps taken."""
    gen = torch.Generator().manual_seed(seed)
    opt = torch.optim.Adam([p for p in net.parameters() if p.requires_grad], lr=lr)
    budget = {"total": max(total, 1)}

    def rate(step):
        n = budget["total"]
        warm = max(1, n // 20)
        return (step + 1) / warm if step < warm else 0.5 * (1 + np.cos(np.pi * min(1.0, (step - warm) / max(1, n - warm))))

    sched = torch.optim.lr_scheduler.LambdaLR(opt, rate)
    start, step = time.time(), 0
    net.train()
    while step < budget["total"]:
        order = torch.randperm(len(data[1]), generator=gen)
        loss_sum, seen = 0.0, 0
        for i in range(0, len(order), 128):
            if step >= budget["total"]:
                break
            j = order[i:i + 128]
            opt.zero_grad()
            loss = F.cross_entropy(net(data[0][j]), data[1][j])
            loss.backward()
            opt.step()
            sched.step()
            step += 1
            loss_sum, seen = loss_sum + float(loss) * len(j), seen + len(j)
            if step == 10:
                fits = int(max_seconds / ((time.time() - start) / step))
                if fits < budget["total"]:
                    budget["total"] = max(fits, step)
                    say(f"   {total} steps would take over --max-seconds {max_seconds:g}: {budget['total']} steps")
        say(f"   {step} steps: loss {loss_sum / max(seen, 1):.4f}")
    return step


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", type=Path, required=True, help="the model grove tail --apply wrote")
    ap.add_argument("--out", type=Path, required=True)
    ap.add_argument("--grove", help="the grove binary: check its logits against PyTorch's")
    ap.add_argument("--original", type=Path, help="the model before --apply: compare its logits and accuracy")
    ap.add_argument("--epochs", type=float, default=1, help="passes over the training images")
    ap.add_argument("--lr", type=float, default=2e-4, help="Adam's peak learning rate")
    ap.add_argument("--max-seconds", type=float, default=240,
                    help="fewer steps when the first ones show the epochs would take longer")
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--quick", action="store_true", help="2,000 training and 2,000 test images, 30 steps")
    args = ap.parse_args()
    torch.manual_seed(args.seed)
    torch.set_num_threads(2)
    t0 = time.time()

    def say(text):
        print(f"[{time.time() - t0:6.1f} s] {text}", flush=True)

    (x, y), test = load_fashion_mnist(2500 if args.quick else 60000, 2000 if args.quick else None)
    held = max(500, len(y) // 12)  # the DCCNN kit's held-out images stay out of training here too
    train = (x[:-held], y[:-held])
    steps = int(args.epochs * ((len(train[1]) + 127) // 128))
    if args.quick:
        steps = min(steps, 30)

    net = OnnxNet(onnx.load(str(args.model)))
    images = test[0][:8]
    report = {"model": str(args.model), "seed": args.seed, "epochs": args.epochs, "lr": args.lr,
              "train_images": len(train[1]), "test_images": len(test[1])}
    with torch.no_grad():
        net.eval()
        logits = net(images).numpy()
    if args.grove:
        diff = float(np.abs(grove_logits(args.grove, args.model, images.numpy()) - logits).max())
        report["grove_vs_torch_before"] = diff
        say(f"grove against PyTorch on {args.model.name}: largest difference {diff:.2e}")
        if not diff <= 1e-4:
            raise SystemExit(f"retrain: grove's logits of {args.model} differ from PyTorch's by {diff:.2e} (over 1e-4)")
    if args.original:
        original = OnnxNet(onnx.load(str(args.original)))
        with torch.no_grad():
            original.eval()
            report["applied_vs_original"] = float(np.abs(original(images).numpy() - logits).max())
        report["original_accuracy"] = accuracy(original, test)
        say(f"applied against the original: largest logit difference {report['applied_vs_original']:.2e}; "
            f"original test accuracy {report['original_accuracy']:.4f}")
    report["accuracy_before"] = accuracy(net, test)
    say(f"test accuracy before fine-tuning: {report['accuracy_before']:.4f}")
    report["steps"] = fine_tune(net, train, steps, args.lr, args.seed, args.max_seconds, say)
    report["accuracy_after"] = accuracy(net, test)
    say(f"test accuracy after {report['steps']} steps: {report['accuracy_after']:.4f}")

    args.out.parent.mkdir(parents=True, exist_ok=True)
    net.save(args.out)
    if args.grove:
        with torch.no_grad():
            net.eval()
            diff = float(np.abs(grove_logits(args.grove, args.out, images.numpy()) - net(images).numpy()).max())
        report["grove_vs_torch_after"] = diff
        if not diff <= 1e-4:
            raise SystemExit(f"retrain: grove's logits of {args.out} differ from PyTorch's by {diff:.2e} (over 1e-4)")
    report["seconds"] = round(time.time() - t0, 1)
    Path(str(args.out) + ".json").write_text(json.dumps(report, indent=1) + "\n")
    say(f"wrote {args.out} and {args.out}.json")


if __name__ == "__main__":
    main()

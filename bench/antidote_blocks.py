#!/usr/bin/python3
"""How many Winograd output blocks hold a kept position when Antidote keeps positions one by one,
and how many of a computed output's taps read kept positions, on real Fashion-MNIST test images
(docs/dynamic.md, "Antidote").

  /usr/bin/python3 bench/antidote_blocks.py --model DIR/plain.onnx [--positions 0.5] [--images 500] [--out F.json]

A pruned conv on Winograd skips a block of outputs only when none of its centres is kept
(kernels/winograd_nhwc.h, `computed`). With positions kept at random, a share p of them, a block
of b x b holds one with probability 1 - (1 - p)^(b * b): nearly always. Spatial attention on
real images keeps the object's positions, which cluster, so fewer blocks might hold one. This
measures it on the maps that the kit network's stride-1 3x3 convs read (relu1.out, 14 x 14, and
relu3.out, 7 x 7), for blocks of 4 (F(4x4, 3x3)) and 2 (F(2x2, 3x3)): per image, the share of
blocks holding a kept centre; the median and the 10th and 90th percentiles over the images.
On the row path a pruned conv computes the outputs centred on kept positions, and skips the
taps that read pruned ones (kernels/conv_rows.h, kept_pixels): per image, the share of a
computed output's 3 x 3 taps that read kept positions (padding counts as pruned), against
1/9 + 8/9 p for positions kept at random.

MODEL is the kit's plain network (tools/dynamic/train_antidote.py writes DIR/plain.onnx); the
keep decision is the kit's (tools/dynamic/antidote.py keep_masks), the one grove runs. The model
test (tests/models/antidote_model_test.py) runs it on the quick kit's network.
"""
import argparse
import json
import sys
from pathlib import Path

import onnx
import torch
import torch.nn.functional as F
from onnx import numpy_helper

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT / "tools" / "dynamic"))
import antidote  # noqa: E402
from datasets import load_fashion_mnist  # noqa: E402

WINOGRAD_MAPS = (1, 3)  # layers whose output a stride-1 3x3 conv reads: relu1.out, relu3.out


def load_plain(path):
    """The kit's PlainNet with the weights of its exported ONNX file (any --width-mult: the
    first conv's channels give it)."""
    w = {i.name: torch.tensor(numpy_helper.to_array(i)) for i in onnx.load(path).graph.initializer}
    net = antidote.PlainNet(w["conv0.weight"].shape[0] / antidote.LAYERS[0][0])
    state = net.state_dict()
    for layer in range(len(antidote.LAYERS)):
        state[f"convs.{layer}.weight"] = w[f"conv{layer}.weight"]
        state[f"bns.{layer}.weight"], state[f"bns.{layer}.bias"] = w[f"bn{layer}.scale"], w[f"bn{layer}.bias"]
        state[f"bns.{layer}.running_mean"], state[f"bns.{layer}.running_var"] = w[f"bn{layer}.mean"], w[f"bn{layer}.var"]
    state["fc.weight"], state["fc.bias"] = w["fc.weight"], w["fc.bias"]
    net.load_state_dict(state)
    return net.eval()


def block_shares(mask, block):
    """[N, H, W] 0/1 -> per image, the share of block x block blocks (grid from (0, 0)) with a 1."""
    n, h, w = mask.shape
    bh, bw = -(-h // block), -(-w // block)
    padded = F.pad(mask, (0, bw * block - w, 0, bh * block - h))
    return padded.view(n, bh, block, bw, block).amax((2, 4)).flatten(1).mean(1)


def kept_tap_shares(mask):
    """[N, H, W] 0/1 -> per image, the share of the kept positions' 3 x 3 taps (pad 1) that
    read kept positions."""
    m = mask.unsqueeze(1).float()
    neighbours = F.conv2d(m, torch.ones(1, 1, 3, 3), padding=1)
    return (neighbours * m).flatten(1).sum(1) / (9 * m.flatten(1).sum(1))


def measure(args):
    net = load_plain(args.model)
    _, (x, _) = load_fashion_mnist(1, args.images)
    out = {"model": str(args.model), "positions": args.positions, "images": len(x), "maps": {}}
    with torch.no_grad():
        h = x
        for layer in range(max(WINOGRAD_MAPS) + 1):
            h = F.relu(net.bns[layer](net.convs[layer](h)))
            if layer not in WINOGRAD_MAPS:
                continue
            _, kept = antidote.keep_masks(h, 1.0, args.positions)
            kept = kept[:, 0]
            name = antidote.value_name(layer)
            out["maps"][name] = {}
            for block in (4, 2):
                s = block_shares(kept, block)
                row = {"median": float(s.median()), "p10": float(s.quantile(0.1)), "p90": float(s.quantile(0.9)),
                       "uniform": 1 - (1 - args.positions) ** (block * block)}
                out["maps"][name][f"block{block}"] = row
                print(f"{name} {kept.shape[1]}x{kept.shape[2]}, blocks of {block}: blocks holding a kept centre "
                      f"median {row['median']:.3f} (p10 {row['p10']:.3f}, p90 {row['p90']:.3f}); "
                      f"positions at random: {row['uniform']:.3f}")
            s = kept_tap_shares(kept)
            row = {"median": float(s.median()), "p10": float(s.quantile(0.1)), "p90": float(s.quantile(0.9)),
                   "uniform": (1 + 8 * args.positions) / 9}
            out["maps"][name]["kept_taps"] = row
            print(f"{name}: a computed output's taps reading kept positions median {row['median']:.3f} "
                  f"(p10 {row['p10']:.3f}, p90 {row['p90']:.3f}); positions at random: {row['uniform']:.3f}")
    return out


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--model", required=True)
    ap.add_argument("--positions", type=float, default=0.5, help="the share of positions kept")
    ap.add_argument("--images", type=int, default=500, help="the first test images")
    ap.add_argument("--out")
    args = ap.parse_args()
    r = measure(args)
    if args.out:
        Path(args.out).write_text(json.dumps(r, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())

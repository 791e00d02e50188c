"""The datasets the training kits read, from Debian packages (no downloads).

Fashion-MNIST (`apt-get install dataset-fashion-mnist`): 60,000 training and 10,000 test
images of 28x28, 10 classes of clothing; hard enough that width, pruning and paths show in
the accuracy. scikit-learn's digits (python3-sklearn) stay the quick mode's data elsewhere.
"""
import gzip
import os
from pathlib import Path

import numpy as np
import torch

FASHION_DIR = Path(os.environ.get("GROVE_FASHION_MNIST", "/usr/share/datasets/fashion-mnist"))
FASHION_CLASSES = ["T-shirt/top", "Trouser", "Pullover", "Dress", "Coat", "Sandal", "Shirt", "Sneaker", "Bag",
                   "Ankle boot"]


def _idx(path: Path, magic: int, dims: int) -> np.ndarray:
    """One IDX file (the MNIST format): a big-endian header of magic and sizes, then uint8 data."""
    with gzip.open(path, "rb") as f:
        data = f.read()
    header = np.frombuffer(data[:4 + 4 * dims], dtype=">u4")
    if int(header[0]) != magic:
        raise ValueError(f"{path}: not an IDX file of {dims} dimensions (magic {int(header[0]):#x})")
    shape = tuple(int(d) for d in header[1:])
    body = np.frombuffer(data[4 + 4 * dims:], dtype=np.uint8)
    if body.size != int(np.prod(shape)):
        raise ValueError(f"{path}: {body.size} bytes of data for a shape {shape}")
    return body.reshape(shape)


def load_fashion_mnist(train_limit=None, test_limit=None):
    """((x_train [N, 1, 28, 28] in [0, 1], y_train), (x_test, y_test)) as torch tensors; the
    first `train_limit` / `test_limit` images when given (the files' own order)."""
    if not (FASHION_DIR / "train-images-idx3-ubyte.gz").exists():
        raise SystemExit(f"Fashion-MNIST is not in {FASHION_DIR}: apt-get install dataset-fashion-mnist "
                         "(or set GROVE_FASHION_MNIST to the folder of its four .gz files)")

    def part(prefix, limit):
        x = _idx(FASHION_DIR / f"{prefix}-images-idx3-ubyte.gz", 0x803, 3)[:limit]
        y = _idx(FASHION_DIR / f"{prefix}-labels-idx1-ubyte.gz", 0x801, 1)[:limit]
        return (torch.tensor(x, dtype=torch.float32).unsqueeze(1) / 255.0, torch.tensor(y, dtype=torch.long))

    return part("train", train_limit), part("t10k", test_limit)


def accuracy(net, data, batch=1000):
    """The share of (x, y) `data` whose argmax of net(x) is y, in batches, in eval mode."""
    net.eval()
    right = 0
    with torch.no_grad():
        for i in range(0, len(data[1]), batch):
            right += int((net(data[0][i:i + batch]).argmax(1) == data[1][i:i + batch]).sum())
    return right / max(len(data[1]), 1)

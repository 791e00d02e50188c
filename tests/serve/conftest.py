"""Fixtures the server's pytest files share."""
import os
import subprocess
import tempfile

import numpy as np
import pytest


@pytest.fixture(scope="module")
def grove_run_logits():
    """The CLI's own answer for the default model's stored input: `grove run --output`."""
    src = os.environ["GROVE_SOURCE_DIR"]
    with tempfile.TemporaryDirectory() as d:
        subprocess.run([os.environ["GROVE_BIN"], "run", os.path.join(src, "models", "default.onnx"), "--threads", "2",
                        "--input", "image=" + os.path.join(src, "models", "default_input.npy"), "--output", d],
                       check=True, capture_output=True)
        return np.load(os.path.join(d, "logits.npy"))

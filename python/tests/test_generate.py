"""Session.generate against PyTorch's greedy loop on a tiny GPT-2-shaped decoder with a KV cache
(bench/models/export_decoder_models.py writes the model and PyTorch's tokens)."""
import json
import os
import subprocess
import tempfile

import pytest

import grove

SRC = os.environ.get("GROVE_SOURCE_DIR", os.path.join(os.path.dirname(__file__), "..", ".."))


@pytest.fixture(scope="module")
def decoder():
    with tempfile.TemporaryDirectory(prefix="grove_py_generate_") as work:
        subprocess.run(["/usr/bin/python3", os.path.join(SRC, "bench", "models", "export_decoder_models.py"),
                        "--out", work, "--only", "gpt2_kv_tiny", "--reference", "--new-tokens", "12"],
                       check=True, capture_output=True)
        with open(os.path.join(work, "gpt2_kv_tiny.ref.json")) as f:
            reference = json.load(f)
        yield grove.Session(os.path.join(work, "gpt2_kv_tiny.onnx"), threads=2), reference


def test_greedy_tokens_equal_pytorchs(decoder):
    session, reference = decoder
    for run in reference:
        assert session.generate(run["prompt"], max_new_tokens=12, min_capacity=4) == run["tokens"]


def test_stats_eos_and_streaming(decoder):
    session, reference = decoder
    run = reference[0]
    tokens, stats = session.generate(run["prompt"], max_new_tokens=12, stats=True)
    assert tokens == run["tokens"]
    assert stats["prefill_ms"] > 0 and len(stats["step_ms"]) == 11 and stats["cache_capacity"] >= 17
    # Stops after the end token (included), and when on_token says so.
    eos = run["tokens"][3]
    assert session.generate(run["prompt"], max_new_tokens=12, eos=eos) == run["tokens"][:run["tokens"].index(eos) + 1]
    seen = []
    assert session.generate(run["prompt"], max_new_tokens=12, on_token=lambda t: seen.append(t) or len(seen) < 5) == \
        run["tokens"][:5]
    assert seen == run["tokens"][:5]


def test_sampling_repeats_with_its_seed(decoder):
    session, _ = decoder
    a = session.generate([1, 2, 3], max_new_tokens=10, temperature=1.0, top_k=20, seed=9)
    b = session.generate([1, 2, 3], max_new_tokens=10, temperature=1.0, top_k=20, seed=9)
    assert a == b and len(a) == 10


def test_errors_are_raised(decoder):
    session, _ = decoder
    with pytest.raises(RuntimeError, match="prompt has no tokens"):
        session.generate([], max_new_tokens=3)

    def boom(token):
        raise ValueError("from on_token")
    with pytest.raises(ValueError, match="from on_token"):
        session.generate([1], max_new_tokens=3, on_token=boom)

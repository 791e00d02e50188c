#!/usr/bin/env python3
"""The com.microsoft contrib ops that ONNX Runtime's tools write into models (and its
ONNX-domain SimplifiedLayerNormalization, and ONNX ops newer than Debian's node tests), each in a one- or two-node model built with
onnx.helper, run by grove (2 threads, and the reference executor) and by ONNX Runtime
(onnxruntime-node) on the same seeded inputs.

A case may run ONNX Runtime on an equivalent model instead (MultiHeadAttention's packed forms,
which ONNX Runtime's CPU kernel does not implement, against the same heads unpacked), or may
expect grove to refuse the node with a one-line error naming the op.

Exit 0: float outputs within 1e-4 of max |ort|, 8-bit and integer outputs within one step,
every expected refusal given.
Exit 1: a mismatch or a grove error. Exit 77 (ctest: skipped): no ONNX Runtime.
"""
import argparse
import subprocess
import sys
import tempfile
from pathlib import Path

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

sys.path.insert(0, str(Path(__file__).resolve().parent))
from real_model_test import ORT_NODE, grove_file_stem, run_grove, run_ort, skip  # noqa: E402

F = TensorProto.FLOAT
rng = np.random.default_rng(54)


def f32(*shape, lo=-2.0, hi=2.0):
    return rng.uniform(lo, hi, size=shape).astype(np.float32)


def u8(*shape):
    return rng.integers(0, 256, size=shape, dtype=np.uint8)


def i8(*shape):
    return rng.integers(-128, 128, size=shape, dtype=np.int8)


def model(nodes, inputs, outputs, initializers=(), opset=17):
    """inputs: {name: array} (graph inputs); initializers: {name: array}; outputs: [(name, elem_type)]."""
    g = helper.make_graph(
        nodes, "contrib",
        [helper.make_tensor_value_info(n, onnx.mapping.NP_TYPE_TO_TENSOR_TYPE[a.dtype], a.shape) for n, a in inputs.items()],
        [helper.make_tensor_value_info(n, t, None) for n, t in outputs],
        [numpy_helper.from_array(a, n) for n, a in dict(initializers).items()])
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset), helper.make_opsetid("com.microsoft", 1)])
    m.ir_version = 10 if opset >= 21 else 8
    return m


def ms(op, inputs, outputs, **attrs):
    return helper.make_node(op, inputs, outputs, domain="com.microsoft", **attrs)


def cases():
    """(name, model, feeds)."""
    x = f32(2, 5, 16)
    yield "Gelu", model([ms("Gelu", ["x"], ["y"])], {"x": x}, [("y", F)]), {"x": x}
    yield "BiasGelu", model([ms("BiasGelu", ["x", "b"], ["y"])], {"x": x}, [("y", F)], {"b": f32(16)}), {"x": x}
    for bias in (True, False):
        ins = ["x", "b"] if bias else ["x"]
        yield f"FastGelu{'Bias' if bias else ''}", model([ms("FastGelu", ins, ["y"])], {"x": x}, [("y", F)],
                                                           {"b": f32(16)} if bias else {}), {"x": x}
    yield "QuickGelu", model([ms("QuickGelu", ["x"], ["y"], alpha=1.5)], {"x": x}, [("y", F)]), {"x": x}
    a, b = f32(3, 4, 7), f32(3, 5, 7)
    yield "FusedMatMul", model([ms("FusedMatMul", ["a", "b"], ["y"], alpha=0.5, transB=1)], {"a": a, "b": b},
                               [("y", F)]), {"a": a, "b": b}
    at = f32(7, 4)
    yield "FusedMatMulTransA", model([ms("FusedMatMul", ["a", "w"], ["y"], transA=1)], {"a": at}, [("y", F)],
                                     {"w": f32(7, 6)}), {"a": at}
    h = f32(2, 6, 32)
    skip_in = f32(2, 6, 32)
    weights = {"gamma": f32(32, lo=0.5, hi=1.5), "beta": f32(32), "bias": f32(32)}
    yield "SkipLayerNormalization", model(
        [ms("SkipLayerNormalization", ["h", "s", "gamma", "beta", "bias"], ["y", "", "", "sum"], epsilon=1e-5)],
        {"h": h, "s": skip_in}, [("y", F), ("sum", F)], weights), {"h": h, "s": skip_in}
    yield "SkipLayerNormalizationNoBeta", model(
        [ms("SkipLayerNormalization", ["h", "s", "gamma"], ["y"])], {"h": h, "s": skip_in}, [("y", F)],
        {"gamma": weights["gamma"]}), {"h": h, "s": skip_in}
    yield "SkipSimplifiedLayerNormalization", model(
        [ms("SkipSimplifiedLayerNormalization", ["h", "s", "gamma", "bias"], ["y", "", "", "sum"], epsilon=1e-6)],
        {"h": h, "s": skip_in}, [("y", F), ("sum", F)], {"gamma": weights["gamma"], "bias": weights["bias"]}), \
        {"h": h, "s": skip_in}
    yield "SimplifiedLayerNormalization", model(
        [helper.make_node("SimplifiedLayerNormalization", ["h", "gamma"], ["y"], axis=-1, epsilon=1e-6)],
        {"h": h}, [("y", F)], {"gamma": weights["gamma"]}), {"h": h}
    # GroupNormalization, newer than Debian's ONNX node tests: scale and bias per group at
    # opset 18, per channel from 21.
    for opset, shape, groups in ((18, (2, 6, 5, 7), 3), (21, (2, 6, 5, 7), 2), (21, (3, 8, 11), 4), (18, (1, 4, 3, 2, 2), 1)):
        x = f32(*shape)
        params = shape[1] if opset >= 21 else groups
        yield f"GroupNormalization{opset}_g{groups}_r{len(shape)}", model(
            [helper.make_node("GroupNormalization", ["x", "scale", "bias"], ["y"], num_groups=groups, epsilon=1e-3)],
            {"x": x}, [("y", F)], {"scale": f32(params, lo=0.5, hi=1.5), "bias": f32(params)}, opset=opset), {"x": x}
    img = f32(1, 3, 9, 9)
    for act, params in (("Relu", []), ("Sigmoid", []), ("LeakyRelu", [0.2]), ("Clip", [-0.5, 0.5]),
                        ("HardSigmoid", [0.3, 0.4]), ("Tanh", [])):
        extra = {"activation_params": params} if params else {}
        yield f"FusedConv{act}", model(
            [ms("FusedConv", ["x", "w", "b"], ["y"], activation=act, kernel_shape=[3, 3], pads=[1, 1, 1, 1], **extra)],
            {"x": img}, [("y", F)], {"w": f32(4, 3, 3, 3, lo=-0.5, hi=0.5), "b": f32(4)}), {"x": img}
    # FusedConv's fourth input Z (act(conv + Z)) is left out: ONNX Runtime 1.20.1 rewrites such a
    # node to its blocked layout and its result matches no reading of Z (act(conv + Z),
    # act(conv) + Z, without the bias); grove's reference follows the documented act(conv + Z).
    # Quantized matrix products, as ONNX Runtime's dynamic quantizer writes them.
    qa = u8(3, 5, 16)
    yield "MatMulIntegerToFloat", model(
        [ms("MatMulIntegerToFloat", ["a", "b", "sa", "sb", "za", "zb", "bias"], ["y"])], {"a": qa}, [("y", F)],
        {"b": i8(16, 8), "sa": np.array(0.02, np.float32), "sb": f32(8, lo=0.001, hi=0.01),
         "za": np.array(128, np.uint8), "zb": np.zeros(8, np.int8), "bias": f32(8)}), {"a": qa}
    fa = f32(4, 16)
    yield "DynamicQuantizeMatMul", model(
        [ms("DynamicQuantizeMatMul", ["a", "b", "sb", "zb", "bias"], ["y"])], {"a": fa}, [("y", F)],
        {"b": i8(16, 8), "sb": f32(8, lo=0.001, hi=0.01), "zb": np.zeros(8, np.int8), "bias": f32(8)}), {"a": fa}
    # QLinear elementwise ops and pools (uint8 and int8).
    for t, make in (("u8", u8), ("i8", i8)):
        dt = TensorProto.UINT8 if t == "u8" else TensorProto.INT8
        qa, qb = make(2, 3, 4, 5), make(3, 1, 5)
        zero = (np.array(128, np.uint8) if t == "u8" else np.array(3, np.int8))
        sc = lambda v: np.array(v, np.float32)  # noqa: E731
        for op in ("QLinearAdd", "QLinearMul"):
            yield f"{op}_{t}", model([ms(op, ["a", "sa", "za", "b", "sb", "zb", "sc", "zc"], ["y"])],
                                     {"a": qa, "b": qb}, [("y", dt)],
                                     {"sa": sc(0.05), "za": zero, "sb": sc(0.03), "zb": zero, "sc": sc(0.1), "zc": zero}), \
                {"a": qa, "b": qb}
        yield f"QLinearSigmoid_{t}", model([ms("QLinearSigmoid", ["a", "sa", "za", "sy", "zy"], ["y"])], {"a": qa},
                                           [("y", dt)], {"sa": sc(0.05), "za": zero, "sy": sc(1 / 256), "zy": zero}), \
            {"a": qa}
        yield f"QLinearLeakyRelu_{t}", model(
            [ms("QLinearLeakyRelu", ["a", "sa", "za", "sy", "zy"], ["y"], alpha=0.1)], {"a": qa}, [("y", dt)],
            {"sa": sc(0.05), "za": zero, "sy": sc(0.04), "zy": zero}), {"a": qa}
        img8 = make(1, 4, 7, 6)
        yield f"QLinearGlobalAveragePool_{t}", model(
            [ms("QLinearGlobalAveragePool", ["x", "sx", "zx", "sy", "zy"], ["y"])], {"x": img8}, [("y", dt)],
            {"sx": sc(0.05), "zx": zero, "sy": sc(0.02), "zy": zero}), {"x": img8}
        yield f"QLinearAveragePool_{t}", model(
            [ms("QLinearAveragePool", ["x", "sx", "zx", "sy", "zy"], ["y"], kernel_shape=[3, 3], strides=[2, 2],
                pads=[1, 1, 1, 1], count_include_pad=1)], {"x": img8}, [("y", dt)],
            {"sx": sc(0.05), "zx": zero, "sy": sc(0.04), "zy": zero}), {"x": img8}
        c1, c2 = make(1, 2, 4, 4), make(1, 3, 4, 4)
        yield f"QLinearConcat_{t}", model(
            [ms("QLinearConcat", ["sy", "zy", "x1", "s1", "z1", "x2", "s2", "z2"], ["y"], axis=1)],
            {"x1": c1, "x2": c2}, [("y", dt)],
            {"sy": sc(0.05), "zy": zero, "s1": sc(0.03), "z1": zero, "s2": sc(0.07), "z2": zero}), {"x1": c1, "x2": c2}

    yield from transformer_cases()
    yield from lstm_cases()


def i32(*values):
    return np.array(values, np.int32)


def transformer_cases():
    """EmbedLayerNormalization, Attention, MultiHeadAttention and RotaryEmbedding as ONNX Runtime's
    transformer optimizer writes them."""
    I32 = TensorProto.INT32
    B, S, H, V = 2, 5, 16, 13
    ids, seg = rng.integers(0, V, (B, S)).astype(np.int32), rng.integers(0, 2, (B, S)).astype(np.int32)
    mask = np.array([[1, 1, 1, 0, 0], [1, 1, 1, 1, 1]], np.int32)
    tables = {"word": f32(V, H), "pos": f32(9, H), "seg_t": f32(2, H), "gamma": f32(H, lo=0.5, hi=1.5), "beta": f32(H)}
    feeds = {"ids": ids, "seg": seg, "mask": mask}
    yield "EmbedLayerNormalization", model(
        [ms("EmbedLayerNormalization", ["ids", "seg", "word", "pos", "seg_t", "gamma", "beta", "mask"],
            ["y", "mask_index", "sum"], epsilon=1e-5)], feeds, [("y", F), ("mask_index", I32), ("sum", F)], tables), feeds
    yield "EmbedLayerNormalizationNoSegment", model(
        [ms("EmbedLayerNormalization", ["ids", "", "word", "pos", "", "gamma", "beta"], ["y", "mask_index"])],
        {"ids": ids}, [("y", F), ("mask_index", I32)], tables), {"ids": ids}
    for name, pos_ids in (("Broadcast", np.array([[4, 3, 2, 1, 0]], np.int32)),
                          ("PerRow", rng.integers(0, 9, (B, S)).astype(np.int32))):
        feeds = {"ids": ids, "seg": seg, "pos_ids": pos_ids}
        yield f"EmbedLayerNormalizationPositionIds{name}", model(
            [ms("EmbedLayerNormalization", ["ids", "seg", "word", "pos", "seg_t", "gamma", "beta", "", "pos_ids"],
                ["y", "mask_index"], epsilon=1e-6)], feeds, [("y", F), ("mask_index", I32)], tables), feeds
    bad = np.array([[0, 1, 2, 3, V]], np.int32)
    yield "EmbedLayerNormalizationBadId", model(
        [ms("EmbedLayerNormalization", ["ids", "", "word", "pos", "", "gamma", "beta"], ["y"])],
        {"ids": bad}, [("y", F)], tables), {"ids": bad}, {"refuse": "outside"}

    # Attention: input [B, S, 16] projected to 2 heads of 8 (v: 4 with qkv_hidden_sizes).
    x = f32(B, S, H)
    weights = {"w": f32(H, 3 * H, lo=-0.5, hi=0.5), "b": f32(3 * H, lo=-0.5, hi=0.5)}
    masks = {"": None, "Mask1D": i32(3, 5), "Mask1DStart": i32(4, 5, 1, 0),
             "Mask2D": np.array([[1, 1, 0, 1, 0], [1, 1, 1, 1, 1]], np.int32),
             "Mask3D": rng.integers(0, 2, (B, S, S)).astype(np.int32) | np.eye(S, dtype=np.int32)[None]}
    for uni in (0, 1):
        for mname, m in masks.items():
            if uni and mname in ("Mask1DStart", "Mask3D"):
                continue
            ins = ["x", "w", "b"] + (["m"] if m is not None else [])
            feeds = {"x": x, **({"m": m} if m is not None else {})}
            yield f"Attention{'Causal' if uni else ''}{mname}", model(
                [ms("Attention", ins, ["y"], num_heads=2, unidirectional=uni)], feeds, [("y", F)], weights), feeds
    w_small = {"w": f32(H, 40, lo=-0.5, hi=0.5), "b": f32(40, lo=-0.5, hi=0.5), "ab": f32(B, 2, S, S)}
    yield "AttentionQkvSizesScaleBias", model(
        [ms("Attention", ["x", "w", "b", "", "", "ab"], ["y"], num_heads=2, qkv_hidden_sizes=[16, 16, 8], scale=0.3)],
        {"x": x}, [("y", F)], w_small), {"x": x}
    past = f32(2, B, 2, 3, 8)
    yield "AttentionPastRefused", model(
        [ms("Attention", ["x", "w", "b", "", "past"], ["y"], num_heads=2)], {"x": x, "past": past}, [("y", F)],
        weights), {"x": x, "past": past}, {"refuse": "past"}

    # MultiHeadAttention: 2 heads of 8; query length 4, key/value length 6.
    N, Hd, Sq, L = 2, 8, 4, 6
    D = N * Hd
    q, k, v = f32(B, Sq, D), f32(B, L, D), f32(B, L, D)
    bias = {"bias": f32(3 * D, lo=-0.5, hi=0.5)}
    feeds = {"q": q, "k": k, "v": v}
    yield "MultiHeadAttentionBias", model(
        [ms("MultiHeadAttention", ["q", "k", "v", "bias"], ["y"], num_heads=N)], feeds, [("y", F)], bias), feeds
    # The masked cases keep the key as long as the query: ONNX Runtime 1.20.1's CPU kernel lays
    # a key_padding_mask out in rows of past + query length, so with a longer or shorter key
    # its result reads the mask at wrong offsets (grove follows the documented [B, past + L]).
    ks, vs = f32(B, Sq, D), f32(B, Sq, D)
    kpm = np.array([[1, 1, 1, 0], [1, 1, 1, 1]], np.int32)
    self_kv = {"q": q, "k": ks, "v": vs, "kpm": kpm}
    yield "MultiHeadAttentionMask2D", model(
        [ms("MultiHeadAttention", ["q", "k", "v", "", "kpm"], ["y"], num_heads=N, scale=0.2)], self_kv, [("y", F)]), \
        self_kv
    kpm3 = rng.integers(0, 2, (B, Sq, Sq)).astype(np.int32)
    kpm3[:, :, 0] = 1
    self_kv3 = {**self_kv, "kpm": kpm3}
    yield "MultiHeadAttentionMask3D", model(
        [ms("MultiHeadAttention", ["q", "k", "v", "", "kpm"], ["y"], num_heads=N)], self_kv3, [("y", F)]), self_kv3
    self_feeds = {"q": q, "k": ks, "v": vs, "lens": i32(3, 4)}
    yield "MultiHeadAttentionCausalMask1D", model(
        [ms("MultiHeadAttention", ["q", "k", "v", "bias", "lens"], ["y"], num_heads=N, unidirectional=1)],
        self_feeds, [("y", F)], bias), self_feeds
    ab = f32(1, N, Sq, L)
    yield "MultiHeadAttentionAttentionBias", model(
        [ms("MultiHeadAttention", ["q", "k", "v", "", "", "ab"], ["y"], num_heads=N)], feeds, [("y", F)], {"ab": ab}), feeds
    kh, vh = f32(B, N, L, Hd), f32(B, N, L, Hd)
    yield "MultiHeadAttentionHeadsKV", model(
        [ms("MultiHeadAttention", ["q", "kh", "vh"], ["y"], num_heads=N)], {"q": q, "kh": kh, "vh": vh}, [("y", F)]), \
        {"q": q, "kh": kh, "vh": vh}
    pk, pv = f32(B, N, 3, Hd), f32(B, N, 3, Hd)
    past_feeds = {"q": q, "k": ks, "v": vs, "pk": pk, "pv": pv}
    yield "MultiHeadAttentionPastCausal", model(
        [ms("MultiHeadAttention", ["q", "k", "v", "bias", "", "", "pk", "pv"], ["y", "present_k", "present_v"],
            num_heads=N, unidirectional=1)], past_feeds, [("y", F), ("present_k", F), ("present_v", F)], bias), past_feeds
    # Packed forms: ONNX Runtime's CPU kernel implements neither, so it runs the same heads
    # unpacked (query, key and value [B, S, N * H]) with the same bias.
    qkv = f32(B, Sq, N, 3, Hd)
    unpacked = {n: np.ascontiguousarray(qkv[:, :, :, i, :]).reshape(B, Sq, D) for i, n in enumerate("qkv")}
    yield "MultiHeadAttentionPackedQKV", model(
        [ms("MultiHeadAttention", ["qkv", "", "", "bias"], ["y"], num_heads=N, unidirectional=1)], {"qkv": qkv},
        [("y", F)], bias), {"qkv": qkv}, {"ort": (model(
            [ms("MultiHeadAttention", ["q", "k", "v", "bias"], ["y"], num_heads=N, unidirectional=1)], unpacked,
            [("y", F)], bias), unpacked)}
    kv = f32(B, L, N, 2, Hd)
    kv_unpacked = {"q": q, **{n: np.ascontiguousarray(kv[:, :, :, i, :]).reshape(B, L, D) for i, n in enumerate("kv")}}
    yield "MultiHeadAttentionPackedKV", model(
        [ms("MultiHeadAttention", ["q", "kv"], ["y"], num_heads=N)], {"q": q, "kv": kv}, [("y", F)]), \
        {"q": q, "kv": kv}, {"ort": (model(
            [ms("MultiHeadAttention", ["q", "k", "v"], ["y"], num_heads=N)], kv_unpacked, [("y", F)]), kv_unpacked)}
    lens3 = np.array([6, 6, 0, 0, 0, 0, 0, 0], np.int32)
    yield "MultiHeadAttentionMask3BPlus2Refused", model(
        [ms("MultiHeadAttention", ["q", "k", "v", "", "lens"], ["y"], num_heads=N)], {**feeds, "lens": lens3},
        [("y", F)]), {**feeds, "lens": lens3}, {"refuse": "3 * batch + 2"}

    # RotaryEmbedding: 2 heads of 8, caches for 12 positions.
    xr = f32(B, S, D)
    angles = np.arange(12)[:, None] * (10000.0 ** (-np.arange(4) / 4))[None]
    caches = {"cos": np.cos(angles).astype(np.float32), "sin": np.sin(angles).astype(np.float32)}
    for inter in (0, 1):
        yield f"RotaryEmbeddingOffset{'Interleaved' if inter else ''}", model(
            [ms("RotaryEmbedding", ["x", "p", "cos", "sin"], ["y"], interleaved=inter)], {"x": xr}, [("y", F)],
            {**caches, "p": np.array([3], np.int64)}), {"x": xr}
        pos = rng.integers(0, 12, (B, S)).astype(np.int64)
        yield f"RotaryEmbeddingPositions{'Interleaved' if inter else ''}", model(
            [ms("RotaryEmbedding", ["x", "p", "cos", "sin"], ["y"], interleaved=inter)], {"x": xr, "p": pos}, [("y", F)],
            caches), {"x": xr, "p": pos}
    xh = f32(B, N, S, Hd)
    yield "RotaryEmbeddingHeadsFirst", model(
        [ms("RotaryEmbedding", ["x", "p", "cos", "sin"], ["y"])], {"x": xh}, [("y", F)],
        {**caches, "p": np.array(0, np.int64)}), {"x": xh}
    half = {n: np.ascontiguousarray(c[:, :2]) for n, c in caches.items()}
    yield "RotaryEmbeddingPartial", model(
        [ms("RotaryEmbedding", ["x", "p", "cos", "sin"], ["y"], rotary_embedding_dim=4, num_heads=N, interleaved=1)],
        {"x": xr}, [("y", F)], {**half, "p": np.array([2], np.int64)}), {"x": xr}
    far = np.full((B, S), 12, np.int64)
    yield "RotaryEmbeddingPositionRefused", model(
        [ms("RotaryEmbedding", ["x", "p", "cos", "sin"], ["y"])], {"x": xr, "p": far}, [("y", F)], caches), \
        {"x": xr, "p": far}, {"refuse": "outside"}


def quantize_lstm_weight(w, signed, per_column):
    """An ONNX LSTM weight [dirs, 4H, K] as DynamicQuantizeLSTM takes it: [dirs, K, 4H] 8-bit with
    scale and zero point per direction ([dirs]) or per column ([dirs, 4H]), the zero point one
    value per direction (ONNX Runtime's kernel requires it)."""
    wt = np.transpose(w, (0, 2, 1))
    axes = (1,) if per_column else (1, 2)
    if signed:
        scale = np.abs(wt).max(axis=axes) / 127.0
        zero = np.zeros(scale.shape, np.int8)
        q = np.clip(np.round(wt / np.expand_dims(scale, axes)), -127, 127).astype(np.int8)
    else:
        scale = (wt.max(axis=axes) - wt.min(axis=axes)) / 255.0 * 2
        zero = np.full(scale.shape, 128, np.uint8)
        q = np.clip(np.round(wt / np.expand_dims(scale, axes)) + 128, 0, 255).astype(np.uint8)
    return q, scale.astype(np.float32), zero


def lstm_cases():
    """DynamicQuantizeLSTM as ONNX Runtime's dynamic quantizer writes it for an LSTM. ONNX Runtime
    runs with one thread (bench/runners/ort_runner.js), so it quantizes the hidden state of the
    whole batch at once per step, as grove's reference does."""
    configs = [
        # name, direction, batch, signed, per_column, extras, attributes
        ("Forward", "forward", 1, True, False, (), {}),
        ("BidirectionalPerColumn", "bidirectional", 3, True, True, ("h0", "c0", "P"), {}),
        ("ReverseUint8ClipCoupled", "reverse", 2, False, False, ("h0",), {"clip": 0.9, "input_forget": 1}),
        ("BidirectionalUint8PerColumnActivations", "bidirectional", 2, False, True, ("lens",),
         {"activations": ["HardSigmoid", "Tanh", "Softsign", "Sigmoid", "LeakyRelu", "Tanh"],
          "activation_alpha": [0.3, 0.05], "activation_beta": [0.4]}),
    ]
    S, I, H = 6, 5, 4
    for name, direction, batch, signed, per_column, extras, attrs in configs:
        dirs = 2 if direction == "bidirectional" else 1
        x = f32(S, batch, I)
        wq, ws, wz = quantize_lstm_weight(f32(dirs, 4 * H, I, lo=-0.8, hi=0.8), signed, per_column)
        rq, rs, rz = quantize_lstm_weight(f32(dirs, 4 * H, H, lo=-0.8, hi=0.8), signed, per_column)
        inits = {"W": wq, "R": rq, "B": f32(dirs, 8 * H, lo=-0.5, hi=0.5), "ws": ws, "wz": wz, "rs": rs, "rz": rz}
        feeds = {"x": x}
        if "h0" in extras:
            feeds["h0"] = f32(dirs, batch, H, lo=-0.5, hi=0.5)
        if "c0" in extras:
            feeds["c0"] = f32(dirs, batch, H, lo=-0.5, hi=0.5)
        if "P" in extras:
            inits["P"] = f32(dirs, 3 * H, lo=-0.5, hi=0.5)
        if "lens" in extras:
            inits["lens"] = np.full(batch, S, np.int32)
        ins = ["x", "W", "R", "B", "lens" if "lens" in extras else "", "h0" if "h0" in feeds else "",
               "c0" if "c0" in feeds else "", "P" if "P" in inits else "", "ws", "wz", "rs", "rz"]
        node = ms("DynamicQuantizeLSTM", ins, ["y", "y_h", "y_c"], direction=direction, hidden_size=H, **attrs)
        yield f"DynamicQuantizeLSTM{name}", model([node], feeds, [("y", F), ("y_h", F), ("y_c", F)], inits), feeds
    x = f32(S, 2, I)
    wq, ws, wz = quantize_lstm_weight(f32(1, 4 * H, I), True, False)
    rq, rs, rz = quantize_lstm_weight(f32(1, 4 * H, H), True, False)
    inits = {"W": wq, "R": rq, "ws": ws, "wz": wz, "rs": rs, "rz": rz, "lens": i32(S, 3)}
    yield "DynamicQuantizeLSTMShortSequenceRefused", model(
        [ms("DynamicQuantizeLSTM", ["x", "W", "R", "", "lens", "", "", "", "ws", "wz", "rs", "rz"], ["y"], hidden_size=H)],
        {"x": x}, [("y", F)], inits), {"x": x}, {"refuse": "sequence_lens"}


def compare(ref_file, got_file, tol):
    ref = np.load(ref_file)
    if not got_file.exists():
        return False, f"no {got_file.name} from grove"
    got = np.load(got_file)
    if got.shape != ref.shape or got.dtype != ref.dtype:
        return False, f"{got.dtype}{list(got.shape)}, ONNX Runtime's {ref.dtype}{list(ref.shape)}"
    diff = np.abs(got.astype(np.float64) - ref.astype(np.float64))
    if ref.dtype.itemsize == 1:  # 8-bit: one quantization step, the rounding of a tie
        return float(diff.max()) <= 1, f"max |diff| {diff.max():.0f} step(s), {int((diff > 0).sum())} of {diff.size} differ"
    if np.issubdtype(ref.dtype, np.integer):  # counts (EmbedLayerNormalization's mask_index): equal
        return float(diff.max()) == 0, f"{int((diff > 0).sum())} of {diff.size} differ"
    rel = float(diff.max()) / max(float(np.abs(ref).max()), 1e-12)
    return rel <= tol, f"rel. error {rel:.2e}"


def save_case(work, stem, m, feeds):
    """Writes the model as <stem>.onnx and each feed as <stem>_<name>.npy; the model's path."""
    path = work / f"{stem}.onnx"
    onnx.save(m, path)
    for k, v in feeds.items():
        np.save(work / f"{stem}_{k}.npy", v)
    return path


def refused(grove, path, files, expect, op):
    """(ok, text): grove (both executors) refuses the model with one line naming the op and `expect`."""
    for args in (["--threads", "2"], ["--executor", "reference"]):
        cmd = [grove, "run", str(path), "--output", str(path.parent / "refused")] + args
        for k, f in files.items():
            cmd += ["--input", f"{k}={f}"]
        res = subprocess.run(cmd, capture_output=True, text=True)
        lines = res.stderr.strip().splitlines()
        if res.returncode == 0 or res.returncode < 0:
            return False, f"{' '.join(args)}: exit {res.returncode}, expected a refusal"
        if len(lines) != 1 or op not in lines[0] or expect not in lines[0]:
            return False, f"{' '.join(args)}: expected one line naming {op} and '{expect}', got {res.stderr.strip()[-300:]!r}"
    return True, f"refused: {lines[0][-160:]}"


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    ap.add_argument("--grove", required=True)
    ap.add_argument("--only", default="")
    a = ap.parse_args()
    if not ORT_NODE.exists():
        skip(f"no ONNX Runtime at {ORT_NODE} (bench/peers/install.sh installs it)")
    failures = 0
    with tempfile.TemporaryDirectory() as tmp:
        tmp = Path(tmp)
        for name, m, feeds, *rest in cases():
            if a.only not in name:
                continue
            opts = rest[0] if rest else {}
            work = tmp / name
            work.mkdir()
            path = save_case(work, "model", m, feeds)
            files = {k: work / f"model_{k}.npy" for k in feeds}
            if "refuse" in opts:
                ok, text = refused(a.grove, path, files, opts["refuse"], m.graph.node[0].op_type)
                failures += 0 if ok else 1
                print(f"{'ok  ' if ok else 'FAIL'} {name}: {text}")
                continue
            ort_model, ort_feeds = opts.get("ort", (m, feeds))
            ort_path = save_case(work, "ort_model", ort_model, ort_feeds) if "ort" in opts else path
            try:
                run_ort(ort_path, {k: work / f"{ort_path.stem}_{k}.npy" for k in ort_feeds}, work / "ort")
            except RuntimeError as err:
                print(f"FAIL {name}: {err}")
                failures += 1
                continue
            for args in (["--threads", "2"], ["--executor", "reference"]):
                out = work / ("grove" + "".join(args).replace("-", "_"))
                try:
                    run_grove(a.grove, path, files, out, args)
                except RuntimeError as err:
                    print(f"FAIL {name} {' '.join(args)}: {err}")
                    failures += 1
                    continue
                for ref_file in sorted((work / "ort").glob("*.npy")):
                    ok, text = compare(ref_file, out / f"{grove_file_stem(ref_file.stem)}.npy", 1e-4)
                    failures += 0 if ok else 1
                    print(f"{'ok  ' if ok else 'FAIL'} {name} {' '.join(args)}: {ref_file.stem} {text}")
    print(f"contrib_ops_test: {failures} failure(s)")
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())

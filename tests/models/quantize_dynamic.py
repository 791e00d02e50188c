#!/usr/bin/python3
"""Dynamic quantization of an ONNX float model, written the way ONNX Runtime's
quantize_dynamic writes it (onnxruntime's Python package is not in Debian):

    x -> DynamicQuantizeLinear -> (x_q uint8, x_scale, x_zero_point)
    ConvInteger(x_q, W_q, x_zero_point, W_zero_point)       (Conv)
    MatMulInteger(x_q, W_q, x_zero_point, W_zero_point)     (MatMul with constant B, Gemm)
      -> Cast(float) -> Mul(x_scale * W_scale) [-> Add(bias)]

Weights are int8, symmetric (zero point 0, scale max|w| / 127), per output channel unless
asked per tensor. Other nodes are kept as they are.

Usage as a tool: quantize_dynamic.py float.onnx quantized.onnx [--per-tensor]
"""
import argparse
import sys

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def quantize_weights(w, per_channel):
    """w's dim 0 is the output channel. Returns (int8 weights, scale, zero point)."""
    axes = tuple(range(1, w.ndim)) if per_channel else None
    scale = (np.abs(w).max(axis=axes) / np.float32(127)).astype(np.float32)
    scale = np.where(scale == 0, np.float32(1), scale).astype(np.float32)  # an all-zero channel
    shaped = scale.reshape((-1,) + (1,) * (w.ndim - 1)) if per_channel else scale
    q = np.clip(np.rint(w / shaped), -127, 127).astype(np.int8)
    if per_channel:
        return q, scale.reshape(-1), np.zeros(scale.size, np.int8)
    return q, scale.reshape(()), np.zeros((), np.int8)


def quantize_dynamic(model, per_channel=True, per_tensor_convs=()):
    """Rewrites every Conv, Gemm (alpha = beta = 1, no transA) and MatMul with a constant 2-D
    B. `per_tensor_convs`: indices (in graph order) of Convs to quantize per tensor anyway."""
    g = model.graph
    inits = {t.name: numpy_helper.to_array(t) for t in g.initializer}
    nodes, new_inits, conv_index = [], [], 0

    def gemm_ok(node):
        a = {x.name: helper.get_attribute_value(x) for x in node.attribute}
        return a.get("transA", 0) == 0 and a.get("alpha", 1.0) == 1.0 and a.get("beta", 1.0) == 1.0

    for node in g.node:
        weights = inits.get(node.input[1]) if len(node.input) > 1 else None
        if weights is None or not (node.op_type == "Conv" or (node.op_type == "Gemm" and gemm_ok(node))
                                   or (node.op_type == "MatMul" and weights.ndim == 2)):
            nodes.append(node)
            continue
        p = f"q{len(nodes)}"  # torch's node names (/0/Conv) would not make file names
        x = node.input[0]
        bias = node.input[2] if len(node.input) > 2 and node.input[2] else None
        if node.op_type == "Conv":
            channel_major = weights
            per = per_channel and conv_index not in per_tensor_convs
            conv_index += 1
        else:
            trans_b = any(a.name == "transB" and a.i for a in node.attribute)
            channel_major = weights if trans_b else weights.T  # [N, K]
            per = per_channel
        qw, scale, zp = quantize_weights(channel_major, per)
        if node.op_type != "Conv":
            qw = qw.T.copy()  # MatMulInteger's B is [K, N]; per channel = per column
        new_inits += [numpy_helper.from_array(qw, p + "_Wq"), numpy_helper.from_array(zp, p + "_Wzp")]
        nodes.append(helper.make_node("DynamicQuantizeLinear", [x], [p + "_xq", p + "_xs", p + "_xzp"], p + "_dql"))
        if node.op_type == "Conv":
            attrs = {a.name: helper.get_attribute_value(a) for a in node.attribute}
            nodes.append(helper.make_node("ConvInteger", [p + "_xq", p + "_Wq", p + "_xzp", p + "_Wzp"], [p + "_acc"],
                                          p + "_convint", **attrs))
            scale_shape = (1, -1, 1, 1) if per else ()
        else:
            nodes.append(helper.make_node("MatMulInteger", [p + "_xq", p + "_Wq", p + "_xzp", p + "_Wzp"], [p + "_acc"],
                                          p + "_matmulint"))
            scale_shape = (-1,) if per else ()
        new_inits.append(numpy_helper.from_array(scale.reshape(scale_shape).astype(np.float32), p + "_Ws"))
        nodes.append(helper.make_node("Mul", [p + "_xs", p + "_Ws"], [p + "_scale"], p + "_scale_mul"))
        nodes.append(helper.make_node("Cast", [p + "_acc"], [p + "_accf"], p + "_cast", to=TensorProto.FLOAT))
        out = node.output[0]
        nodes.append(helper.make_node("Mul", [p + "_accf", p + "_scale"], [p + "_mul" if bias else out], p + "_mul"))
        if bias:
            b = inits[bias]
            b = b.reshape(1, -1, 1, 1) if node.op_type == "Conv" else b
            new_inits.append(numpy_helper.from_array(b.astype(np.float32), p + "_bias"))
            nodes.append(helper.make_node("Add", [p + "_mul", p + "_bias"], [out], p + "_bias_add"))
    used = {i for n in nodes for i in n.input}
    kept = [t for t in g.initializer if t.name in used]
    graph = helper.make_graph(nodes, g.name + "_quantized", list(g.input), list(g.output), kept + new_inits)
    opset = max(13, next((o.version for o in model.opset_import if o.domain in ("", "ai.onnx")), 13))
    return helper.make_model(graph, opset_imports=[helper.make_opsetid("", opset)])


def main(argv=None):
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("float_model")
    ap.add_argument("quantized_model")
    ap.add_argument("--per-tensor", action="store_true", help="one scale per weight tensor")
    args = ap.parse_args(argv)
    q = quantize_dynamic(onnx.load(args.float_model), per_channel=not args.per_tensor)
    onnx.checker.check_model(q)
    onnx.save(q, args.quantized_model)
    ops = {}
    for n in q.graph.node:
        ops[n.op_type] = ops.get(n.op_type, 0) + 1
    print(args.quantized_model + ": " + ", ".join(f"{k} {v}" for k, v in sorted(ops.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/python3
"""Writes the committed seed corpora (small on purpose): tiny ONNX models covering common op
families, .npy files of every dtype grove reads, and choice scripts for the graph target.
The TileGraph seed is written by `fuzz_tilegraph_replay --write-seed` (scripts/fuzz.sh)."""
import os
import random

import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper

here = os.path.dirname(os.path.abspath(__file__))


def save_model(name, nodes, inputs, outputs, inits=(), opset=17, metadata=None):
    g = helper.make_graph(nodes, name, inputs, outputs, list(inits))
    m = helper.make_model(g, opset_imports=[helper.make_opsetid("", opset)])
    if metadata:
        helper.set_model_props(m, metadata)
    m.ir_version = 8
    onnx.save(m, os.path.join(here, "corpus", "model", name + ".onnx"))


def f(name, shape):
    return helper.make_tensor_value_info(name, TensorProto.FLOAT, shape)


def init(name, arr):
    return numpy_helper.from_array(np.asarray(arr), name)


rng = np.random.default_rng(0)
w = rng.standard_normal((4, 2, 3, 3)).astype(np.float32)
save_model("conv_relu", [helper.make_node("Conv", ["x", "w"], ["c"], pads=[1, 1, 1, 1]),
                         helper.make_node("Relu", ["c"], ["y"])],
           [f("x", [1, 2, 6, 6])], [f("y", [1, 4, 6, 6])], [init("w", w)])
save_model("matmul_add_softmax",
           [helper.make_node("MatMul", ["x", "b"], ["m"]), helper.make_node("Add", ["m", "c"], ["a"]),
            helper.make_node("Softmax", ["a"], ["y"], axis=-1)],
           [f("x", ["n", 8])], [f("y", ["n", 4])],
           [init("b", rng.standard_normal((8, 4)).astype(np.float32)), init("c", np.ones(4, np.float32))])
save_model("reshape_transpose",
           [helper.make_node("Reshape", ["x", "s"], ["r"]), helper.make_node("Transpose", ["r"], ["y"], perm=[1, 0])],
           [f("x", [2, 3, 4])], [f("y", [4, 6])], [init("s", np.array([6, 4], np.int64))])
save_model("pool_concat",
           [helper.make_node("MaxPool", ["x"], ["p"], kernel_shape=[2, 2], strides=[2, 2]),
            helper.make_node("GlobalAveragePool", ["x"], ["g"]),
            helper.make_node("Flatten", ["p"], ["fp"]), helper.make_node("Flatten", ["g"], ["fg"]),
            helper.make_node("Concat", ["fp", "fg"], ["y"], axis=1)],
           [f("x", [1, 3, 4, 4])], [f("y", [1, 15])])
save_model("layernorm_gelu",
           [helper.make_node("LayerNormalization", ["x", "g", "b"], ["l"], axis=-1),
            helper.make_node("Erf", ["l"], ["e"]), helper.make_node("Mul", ["l", "e"], ["y"])],
           [f("x", [2, 5, 8])], [f("y", [2, 5, 8])],
           [init("g", np.ones(8, np.float32)), init("b", np.zeros(8, np.float32))])
# A dynamic model: its grove.subnets metadata is sliced into sub-nets (docs/dynamic.md).
save_model("dynamic_subnets",
           [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1], name="conv1"),
            helper.make_node("BatchNormalization", ["a", "s", "b", "m", "v"], ["n"], name="bn"),
            helper.make_node("Relu", ["n"], ["r"]), helper.make_node("GlobalAveragePool", ["r"], ["g"]),
            helper.make_node("Flatten", ["g"], ["fl"]),
            helper.make_node("Gemm", ["fl", "w2"], ["y"], transB=1, name="fc")],
           [f("x", [1, 2, 4, 4])], [f("y", [1, 3])],
           [init("w1", rng.standard_normal((4, 2, 3, 3)).astype(np.float32)), init("s", np.ones(4, np.float32)),
            init("b", np.zeros(4, np.float32)), init("m", np.zeros(4, np.float32)), init("v", np.ones(4, np.float32)),
            init("m@half", np.full(2, 0.5, np.float32)), init("w2", rng.standard_normal((3, 4)).astype(np.float32))],
           metadata={"grove.subnets": "exempt fc\nsubnet half ratio=0.5 accuracy=0.5\nsubnet nu conv1=3\nsubnet full ratio=1"})
# Antidote: grove.antidote metadata prunes the feature map r per input (docs/dynamic.md).
save_model("antidote_prune",
           [helper.make_node("Conv", ["x", "w1"], ["a"], pads=[1, 1, 1, 1], name="conv1"),
            helper.make_node("Relu", ["a"], ["r"]),
            helper.make_node("Conv", ["r", "w2"], ["y"], pads=[1, 1, 1, 1], strides=[2, 2], name="conv2")],
           [f("x", [2, 2, 5, 5])], [f("y", [2, 3, 3, 3])],
           [init("w1", rng.standard_normal((4, 2, 3, 3)).astype(np.float32)),
            init("w2", rng.standard_normal((3, 4, 3, 3)).astype(np.float32))],
           metadata={"grove.antidote": "prune r channels=0.5 positions=0.75"})
save_model("gather_slice",
           [helper.make_node("Gather", ["x", "i"], ["g"], axis=0),
            helper.make_node("Slice", ["g", "st", "en"], ["y"])],
           [f("x", [5, 6])], [f("y", [2, 3])],
           [init("i", np.array([0, 4], np.int64)), init("st", np.array([0, 1], np.int64)),
            init("en", np.array([2, 4], np.int64))], opset=13)

for dt in ["<f4", "<f8", "<i8", "<i4", "<i2", "|i1", "|u1", "<u2", "<u4", "<u8", "|b1"]:
    arr = (np.arange(6) % 3).astype(np.dtype(dt)).reshape(2, 3)
    np.save(os.path.join(here, "corpus", "npy", dt.strip("<|") + ".npy"), arr)
np.save(os.path.join(here, "corpus", "npy", "scalar.npy"), np.float32(1.5))
np.save(os.path.join(here, "corpus", "npy", "empty.npy"), np.zeros((0, 3), np.float32))

r = random.Random(0)
for i in range(8):
    with open(os.path.join(here, "corpus", "graph", "script%d" % i), "wb") as out:
        out.write(bytes(r.randrange(256) for _ in range(64)))

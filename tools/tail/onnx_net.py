"""An ONNX CNN as a PyTorch module, so that a model `grove tail --apply` resized can be trained
at its new widths and written back into the same graph.

The module runs the graph's nodes in order with torch ops; every float initializer is a
parameter (a BatchNormalization's mean and variance are buffers), so `weights()` returns the
trained tensors under their ONNX names and `save()` writes them into a copy of the model: same
nodes, same names, nothing re-exported. The ops are those of the kits' CNNs (Conv, BatchNorm,
pools, ReduceMean, Flatten, Reshape, Gemm, MatMul, elementwise, Concat, Softmax); any other is
refused by name.
"""
import copy

import numpy as np
import onnx
import torch
import torch.nn as nn
import torch.nn.functional as F
from onnx import numpy_helper


def _attrs(node):
    return {a.name: onnx.helper.get_attribute_value(a) for a in node.attribute}


def _pad_args(pads, rank):
    """ONNX pads [b1, b2, ..., e1, e2, ...] as torch's symmetric padding, or None when uneven."""
    pads = list(pads or [0] * (2 * rank))
    begin, end = pads[:rank], pads[rank:]
    return tuple(begin) if begin == end else None


def _explicit_pad(x, pads, rank, value=0.0):
    """F.pad for ONNX pads over the last `rank` dims (F.pad lists the last dim first)."""
    begin, end = pads[:rank], pads[rank:]
    flat = []
    for b, e in zip(reversed(begin), reversed(end)):
        flat += [b, e]
    return F.pad(x, flat, value=value)


class OnnxNet(nn.Module):
    def __init__(self, model: onnx.ModelProto):
        super().__init__()
        self.model = model
        g = model.graph
        self.inits = {t.name: numpy_helper.to_array(t) for t in g.initializer}
        stats = set()
        for n in g.node:
            if n.op_type == "BatchNormalization":
                stats.update(n.input[3:5])
        # nn.ParameterDict keys may not hold dots: parameters are numbered, the names kept aside.
        self.names = {}
        self.params = nn.ParameterDict()
        for name, value in self.inits.items():
            if value.dtype != np.float32:
                continue
            key = f"p{len(self.names)}"
            self.names[name] = key
            t = torch.from_numpy(value.copy())
            if name in stats:
                self.register_buffer(key, t)
            else:
                self.params[key] = nn.Parameter(t)
        self.inputs = [i.name for i in g.input if i.name not in self.inits]
        self.outputs = [o.name for o in g.output]
        for n in g.node:
            if not hasattr(self, "_op_" + n.op_type):
                raise SystemExit(f"onnx_net: node '{n.name}' is a {n.op_type}, which this module does not run")

    def tensor(self, name):
        key = self.names.get(name)
        if key is not None:
            return self.params[key] if key in self.params else getattr(self, key)
        return torch.from_numpy(self.inits[name].copy())

    def forward(self, *xs):
        env = dict(zip(self.inputs, xs))

        def get(name):
            if name == "":
                return None
            return env[name] if name in env else self.tensor(name)

        for n in self.model.graph.node:
            out = getattr(self, "_op_" + n.op_type)([get(i) for i in n.input], _attrs(n))
            outs = out if isinstance(out, tuple) else (out,)
            for name, value in zip(n.output, outs):
                env[name] = value
        result = [env[o] for o in self.outputs]
        return result[0] if len(result) == 1 else tuple(result)

    def weights(self):
        """{initializer name: numpy array} of every float initializer, as trained."""
        return {name: self.tensor(name).detach().numpy().astype(np.float32) for name in self.names}

    def save(self, path):
        m = copy.deepcopy(self.model)
        trained = self.weights()
        for t in m.graph.initializer:
            if t.name in trained:
                t.CopyFrom(numpy_helper.from_array(trained[t.name], t.name))
        onnx.save(m, str(path))

    # Ops: (inputs, attributes) -> output(s).
    def _op_Conv(self, i, a):
        x, w, b = i[0], i[1], i[2] if len(i) > 2 else None
        rank = w.dim() - 2
        if a.get("auto_pad", b"NOTSET") not in (b"NOTSET", "NOTSET"):
            raise SystemExit("onnx_net: Conv with auto_pad is not supported")
        pads = a.get("pads", [0] * (2 * rank))
        sym = _pad_args(pads, rank)
        if sym is None:
            x, sym = _explicit_pad(x, pads, rank), (0,) * rank
        conv = {1: F.conv1d, 2: F.conv2d, 3: F.conv3d}[rank]
        return conv(x, w, b, a.get("strides", [1] * rank), sym, a.get("dilations", [1] * rank), a.get("group", 1))

    def _op_BatchNormalization(self, i, a):
        return F.batch_norm(i[0], i[3], i[4], i[1], i[2], False, 0.0, a.get("epsilon", 1e-5))

    def _op_Relu(self, i, a):
        return F.relu(i[0])

    def _op_LeakyRelu(self, i, a):
        return F.leaky_relu(i[0], a.get("alpha", 0.01))

    def _op_Sigmoid(self, i, a):
        return torch.sigmoid(i[0])

    def _op_Clip(self, i, a):
        lo = i[1] if len(i) > 1 and i[1] is not None else a.get("min")
        hi = i[2] if len(i) > 2 and i[2] is not None else a.get("max")
        return torch.clamp(i[0], lo, hi)

    def _pool(self, i, a, kind):
        x = i[0]
        k = a["kernel_shape"]
        rank = len(k)
        pads = a.get("pads", [0] * (2 * rank))
        sym = _pad_args(pads, rank)
        if sym is None:
            x, sym = _explicit_pad(x, pads, rank, float("-inf") if kind == "max" else 0.0), (0,) * rank
        strides, ceil = a.get("strides", [1] * rank), bool(a.get("ceil_mode", 0))
        if kind == "max":
            return {1: F.max_pool1d, 2: F.max_pool2d, 3: F.max_pool3d}[rank](x, k, strides, sym, a.get("dilations", 1),
                                                                              ceil)
        avg = {1: F.avg_pool1d, 2: F.avg_pool2d, 3: F.avg_pool3d}[rank]
        return avg(x, k, strides, sym, ceil, bool(a.get("count_include_pad", 0)))

    def _op_MaxPool(self, i, a):
        return self._pool(i, a, "max")

    def _op_AveragePool(self, i, a):
        return self._pool(i, a, "avg")

    def _op_GlobalAveragePool(self, i, a):
        return i[0].mean(dim=tuple(range(2, i[0].dim())), keepdim=True)

    def _op_GlobalMaxPool(self, i, a):
        return i[0].amax(dim=tuple(range(2, i[0].dim())), keepdim=True)

    def _op_ReduceMean(self, i, a):
        axes = a.get("axes")
        if axes is None and len(i) > 1 and i[1] is not None:
            axes = [int(v) for v in i[1]]
        axes = tuple(axes) if axes else tuple(range(i[0].dim()))
        return i[0].mean(dim=axes, keepdim=bool(a.get("keepdims", 1)))

    def _op_Flatten(self, i, a):
        axis = a.get("axis", 1)
        axis = axis + i[0].dim() if axis < 0 else axis
        return i[0].reshape(int(np.prod(i[0].shape[:axis])), -1)

    def _op_Reshape(self, i, a):
        shape = [int(v) for v in i[1]]
        shape = [i[0].shape[k] if v == 0 and not a.get("allowzero", 0) else v for k, v in enumerate(shape)]
        return i[0].reshape(shape)

    def _op_Gemm(self, i, a):
        x, w = i[0], i[1]
        if a.get("transA", 0):
            x = x.t()
        if a.get("transB", 0):
            w = w.t()
        y = a.get("alpha", 1.0) * (x @ w)
        if len(i) > 2 and i[2] is not None:
            y = y + a.get("beta", 1.0) * i[2]
        return y

    def _op_MatMul(self, i, a):
        return i[0] @ i[1]

    def _op_Add(self, i, a):
        return i[0] + i[1]

    def _op_Sub(self, i, a):
        return i[0] - i[1]

    def _op_Mul(self, i, a):
        return i[0] * i[1]

    def _op_Div(self, i, a):
        return i[0] / i[1]

    def _op_Concat(self, i, a):
        return torch.cat(i, dim=a["axis"])

    def _op_Softmax(self, i, a):
        return F.softmax(i[0], dim=a.get("axis", -1))

    def _op_Identity(self, i, a):
        return i[0]

    def _op_Dropout(self, i, a):
        return i[0]

"""Writes a SlimNet as one ONNX file of the full network plus grove's sub-net metadata.

Nodes are written by hand (not torch.onnx.export) so the names the metadata uses (conv0..,
fc) and the BatchNorm nodes stay as they are: the exporter would fold each BatchNorm into
its conv, and each sub-net has its own BatchNorm. The full sub-net's BatchNorm is the
graph's; every other sub-net's is a set of initializers NAME@SUBNET (docs/dynamic.md).
"""
import numpy as np
import onnx
from onnx import TensorProto, helper, numpy_helper


def _np(t):
    return t.detach().cpu().numpy().astype(np.float32)


def export(net, names, accuracies, path, full_index, batch=1, graph_name="slimnet_digits"):
    """`names[i]` and `accuracies[i]` describe net.subnets[i]; `full_index` is the sub-net
    whose widths are the layers' full widths. `batch`: the input's first dimension, a size or
    a symbolic name."""
    assert net.subnets[full_index] == net.widths
    inits, nodes = [], []
    x = "image"
    for layer, (w, stride) in enumerate(zip(net.convs, net.strides)):
        inits.append(numpy_helper.from_array(_np(w), f"conv{layer}.weight"))
        nodes.append(helper.make_node("Conv", [x, f"conv{layer}.weight"], [f"conv{layer}.out"], name=f"conv{layer}",
                                      kernel_shape=[3, 3], pads=[1, 1, 1, 1], strides=[stride, stride]))
        for i, bn in enumerate(net.bns):
            b = bn[layer]
            suffix = "" if i == full_index else "@" + names[i]
            if i != full_index and net.subnets[i][layer] == net.widths[layer] and _same_bn(b, net.bns[full_index][layer]):
                continue
            for key, value in (("scale", b.weight), ("bias", b.bias), ("mean", b.running_mean), ("var", b.running_var)):
                inits.append(numpy_helper.from_array(_np(value), f"bn{layer}.{key}{suffix}"))
        eps = net.bns[full_index][layer].eps
        nodes.append(helper.make_node("BatchNormalization", [f"conv{layer}.out"] + [f"bn{layer}.{k}" for k in ("scale", "bias", "mean", "var")],
                                      [f"bn{layer}.out"], name=f"bn{layer}", epsilon=eps))
        nodes.append(helper.make_node("Relu", [f"bn{layer}.out"], [f"relu{layer}.out"], name=f"relu{layer}"))
        x = f"relu{layer}.out"
    classifier_head(nodes, inits, x, net.fc)
    graph = helper.make_graph(nodes, graph_name,
                              [helper.make_tensor_value_info("image", TensorProto.FLOAT, [batch, 1, net.image, net.image])],
                              [helper.make_tensor_value_info("logits", TensorProto.FLOAT, [batch, 10])], inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", 13)], producer_name="grove tools/dynamic")
    helper.set_model_props(model, {"grove.subnets": metadata(net, names, accuracies)})
    onnx.checker.check_model(model)
    onnx.save(model, path)


def classifier_head(nodes, inits, x, fc):
    """Global average pooling, Flatten and the fully connected layer `fc` (node fc) -> logits."""
    nodes.append(helper.make_node("GlobalAveragePool", [x], ["pool.out"], name="pool"))
    nodes.append(helper.make_node("Flatten", ["pool.out"], ["flat.out"], name="flatten", axis=1))
    inits.append(numpy_helper.from_array(_np(fc.weight), "fc.weight"))
    inits.append(numpy_helper.from_array(_np(fc.bias), "fc.bias"))
    nodes.append(helper.make_node("Gemm", ["flat.out", "fc.weight", "fc.bias"], ["logits"], name="fc", transB=1))


def _same_bn(a, b):
    return all(np.array_equal(_np(x), _np(y)) for x, y in ((a.weight, b.weight), (a.bias, b.bias),
                                                            (a.running_mean, b.running_mean), (a.running_var, b.running_var)))


def metadata(net, names, accuracies):
    lines = ["exempt conv0 fc"]
    for name, acc, counts in zip(names, accuracies, net.subnets):
        ratios = {c / w for c, w in zip(counts[1:], net.widths[1:])}
        uniform = len(ratios) == 1 and all(c == max(1, int(r * w + 0.5)) for r in ratios for c, w in zip(counts[1:], net.widths[1:]))
        what = f"ratio={ratios.pop():g}" if uniform else " ".join(f"conv{i}={c}" for i, c in enumerate(counts) if i > 0)
        lines.append(f"subnet {name} {what} accuracy={acc:.4f}")
    return "\n".join(lines)

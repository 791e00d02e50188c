// ONNX's optimizer ops Adagrad, Adam and Momentum (domain ai.onnx.preview.training, opset 1):
// one update step of one or more tensors. The inputs are the learning rate R, the update
// count T, then one group per role, each holding every optimized tensor in order: the values
// X..., their gradients G..., then the optimizer's state (Adagrad: H..., Momentum: V...,
// Adam: V... then H...). The outputs are the new X... followed by the new state groups in
// the same order. Naive references in double following the pseudo code of ONNX's schemas;
// they let a model exported with its optimizer step run (and be checked) end to end.
#include <cmath>
#include <string>
#include <vector>

#include "ops/op.h"
#include "ops/op_util.h"

namespace grove {
namespace {

// State tensors per optimized tensor: the groups after X and G.
size_t state_groups(const Node& node) { return node.op_type == "Adam" ? 2 : 1; }

// The number of optimized tensors, from the input count (R, T, then 2 + state groups).
size_t tensor_count(const Node& node, size_t inputs) {
  const size_t groups = 2 + state_groups(node);
  if (inputs < 2 + groups || (inputs - 2) % groups != 0)
    throw Error(node.op_type + " takes R, T and " + std::to_string(groups) +
                " tensors per optimized tensor, got " + std::to_string(inputs) + " inputs");
  return (inputs - 2) / groups;
}


// The attribute ONNX gives no default for (Momentum's): missing is an error, not a guess.
float required_float(const Node& node, const char* name) {
  if (!node.has_attr(name)) throw Error(std::string("attribute '") + name + "' is required");
  return node.attr_float(name, 0.0f);
}

bool nesterov(const Node& node) {
  if (!node.has_attr("mode")) throw Error("attribute 'mode' is required (standard or nesterov)");
  const std::string mode = node.attr_string("mode", "");
  if (mode != "standard" && mode != "nesterov")
    throw Error("mode must be standard or nesterov, got '" + mode + "'");
  return mode == "nesterov";
}

// Reads every attribute, so one of the wrong kind or value fails at load time.
void check_attributes(const Node& node) {
  if (node.op_type == "Adagrad") {
    node.attr_float("epsilon", 1e-6f);
    node.attr_float("decay_factor", 0.0f);
    node.attr_float("norm_coefficient", 0.0f);
  } else if (node.op_type == "Adam") {
    for (const char* name : {"alpha", "beta", "epsilon", "norm_coefficient", "norm_coefficient_post"})
      node.attr_float(name, 0.0f);
  } else {
    for (const char* name : {"alpha", "beta", "norm_coefficient"}) required_float(node, name);
    nesterov(node);
  }
}

void infer_optimizer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  const size_t n = tensor_count(node, in.size());
  for (size_t i = 0; i < in.size(); ++i)
    if (!in[i].present) throw Error("input " + std::to_string(i) + " is missing (every input is required)");
  if (!is_f32_or_f64(in[0].dtype) || numel(in[0].shape) != 1)
    throw Error("R must be a float32 or float64 scalar, got " + std::string(dtype_name(in[0].dtype)) + " " +
                shape_str(in[0].shape));
  if (in[1].dtype != DType::i64 || numel(in[1].shape) != 1)
    throw Error("T must be an int64 scalar, got " + std::string(dtype_name(in[1].dtype)) + " " + shape_str(in[1].shape));
  const DType dtype = in[2].dtype;
  if (!is_f32_or_f64(dtype)) throw Error("the optimized tensors must be float32 or float64, got " + std::string(dtype_name(dtype)));
  // Input 2 + g * n + i is tensor i of group g (X, G, then the state groups).
  const size_t groups = 2 + state_groups(node);
  for (size_t g = 0; g < groups; ++g)
    for (size_t i = 0; i < n; ++i) {
      const ValueInfo& t = in[2 + g * n + i];
      if (t.dtype != dtype) throw Error("input " + std::to_string(2 + g * n + i) + " dtype differs from the first X");
      if (t.shape != in[2 + i].shape)
        throw Error("input " + std::to_string(2 + g * n + i) + " has shape " + shape_str(t.shape) + ", expected " +
                    shape_str(in[2 + i].shape) + " (the shape of its X)");
    }
  check_attributes(node);
  // Output j is X_new (group 0) or a new state (groups 1..), always shaped like its X.
  const size_t outputs = (groups - 1) * n;
  if (out.empty() || out.size() > outputs)
    throw Error(node.op_type + " has between 1 and " + std::to_string(outputs) + " outputs for " + std::to_string(n) +
                " optimized tensors, got " + std::to_string(out.size()));
  for (size_t j = 0; j < out.size(); ++j)
    if (!node.outputs[j].empty()) out[j] = ValueInfo{dtype, in[2 + j % n].shape};
}

double load(const Tensor& t, int64_t i) { return t.dtype() == DType::f32 ? t.data<float>()[i] : t.data<double>()[i]; }

void store(Tensor* t, int64_t i, double v) {
  if (!t) return;  // an output the node leaves unnamed
  if (t->dtype() == DType::f32) t->data<float>()[i] = static_cast<float>(v);
  else t->data<double>()[i] = v;
}

// The tensors of one optimized tensor: inputs X, G and the state, and the matching outputs.
struct Slot {
  const Tensor *x, *g, *s1, *s2;  // s1/s2: H (Adagrad), V (Momentum), V then H (Adam)
  Tensor *x_new, *s1_new, *s2_new;
};

Slot slot_of(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out, size_t n, size_t i) {
  auto output = [&](size_t j) { return j < out.size() ? out[j] : nullptr; };
  const bool adam = state_groups(node) == 2;
  return Slot{in[2 + i],     in[2 + n + i], in[2 + 2 * n + i], adam ? in[2 + 3 * n + i] : nullptr,
              output(i),     output(n + i), adam ? output(2 * n + i) : nullptr};
}

struct Step {
  double r;   // R
  int64_t t;  // T
};

void adagrad(const Node& node, const Step& step, const Slot& s) {
  const double epsilon = node.attr_float("epsilon", 1e-6f), decay = node.attr_float("decay_factor", 0.0f),
               norm = node.attr_float("norm_coefficient", 0.0f);
  const double r = step.r / (1.0 + static_cast<double>(step.t) * decay);
  for (int64_t k = 0; k < s.x->numel(); ++k) {
    const double x = load(*s.x, k), g = norm * x + load(*s.g, k);
    const double h = load(*s.s1, k) + g * g;
    store(s.x_new, k, x - r * g / (std::sqrt(h) + epsilon));
    store(s.s1_new, k, h);
  }
}

void momentum(const Node& node, const Step& step, const Slot& s) {
  const double alpha = required_float(node, "alpha"), norm = required_float(node, "norm_coefficient");
  // The gradient's coefficient is 1 at the first step.
  const double beta = step.t > 0 ? required_float(node, "beta") : 1.0;
  const bool nesterov_mode = nesterov(node);
  for (int64_t k = 0; k < s.x->numel(); ++k) {
    const double x = load(*s.x, k), g = norm * x + load(*s.g, k);
    const double v = alpha * load(*s.s1, k) + beta * g;
    store(s.x_new, k, nesterov_mode ? x - step.r * (g + alpha * v) : x - step.r * v);
    store(s.s1_new, k, v);
  }
}

void adam(const Node& node, const Step& step, const Slot& s) {
  const double alpha = node.attr_float("alpha", 0.9f), beta = node.attr_float("beta", 0.999f),
               epsilon = node.attr_float("epsilon", 1e-6f), norm = node.attr_float("norm_coefficient", 0.0f),
               norm_post = node.attr_float("norm_coefficient_post", 0.0f);
  // Bias correction of both running averages, from the second step on.
  const double t = static_cast<double>(step.t);
  const double r = step.t > 0 ? step.r * std::sqrt(1.0 - std::pow(beta, t)) / (1.0 - std::pow(alpha, t)) : step.r;
  for (int64_t k = 0; k < s.x->numel(); ++k) {
    const double x = load(*s.x, k), g = norm * x + load(*s.g, k);
    const double v = alpha * load(*s.s1, k) + (1.0 - alpha) * g;
    const double h = beta * load(*s.s2, k) + (1.0 - beta) * g * g;
    const double x_new = x - r * v / (std::sqrt(h) + epsilon);
    store(s.x_new, k, (1.0 - norm_post) * x_new);
    store(s.s1_new, k, v);
    store(s.s2_new, k, h);
  }
}

void reference_optimizer(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const size_t n = tensor_count(node, in.size());
  const Step step{load(*in[0], 0), in[1]->data<int64_t>()[0]};
  for (size_t i = 0; i < n; ++i) {
    const Slot s = slot_of(node, in, out, n, i);
    if (node.op_type == "Adagrad") adagrad(node, step, s);
    else if (node.op_type == "Adam") adam(node, step, s);
    else momentum(node, step, s);
  }
}

}  // namespace

void register_training_ops(OpRegistry& r) {
  r.add_training("Adagrad", {infer_optimizer, reference_optimizer});
  r.add_training("Adam", {infer_optimizer, reference_optimizer});
  r.add_training("Momentum", {infer_optimizer, reference_optimizer});
}

}  // namespace grove

// The training losses NegativeLogLikelihoodLoss and SoftmaxCrossEntropyLoss: naive references,
// accumulating in double. Both see the scores as [N, C, D] (D the product of the dims after
// C, 1 for rank-2 input) and the target as [N, D]. SoftmaxCrossEntropyLoss is log-softmax
// over C followed by the same negative log-likelihood, so the two share everything after the
// log-probabilities. Models exported from training frameworks keep these ops for evaluation.
#include <algorithm>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "ops/op.h"
#include "ops/op_util.h"

namespace grove {
namespace {

enum class Reduction { none, sum, mean };

Reduction reduction_of(const Node& node) {
  const std::string r = node.attr_string("reduction", "mean");
  if (r == "none") return Reduction::none;
  if (r == "sum") return Reduction::sum;
  if (r == "mean") return Reduction::mean;
  throw Error("reduction must be none, sum or mean, got '" + r + "'");
}

bool is_softmax_cross_entropy(const Node& node) { return node.op_type == "SoftmaxCrossEntropyLoss"; }

// The scores [N, C, d1..dk] seen as [N, C, D].
struct LossDims {
  int64_t n, c, d;
  int64_t score_at(int64_t i, int64_t cls, int64_t j) const { return (i * c + cls) * d + j; }
};

LossDims loss_dims(const Shape& scores) {
  LossDims dims{scores[0], scores[1], 1};
  // Checked: with N = 0 the trailing dims may be huge enough to overflow their product.
  for (size_t k = 2; k < scores.size(); ++k) dims.d = checked_mul(dims.d, scores[k]);
  return dims;
}

// The target's shape: the scores' shape without C.
Shape target_shape_of(const Shape& scores) {
  Shape t{scores[0]};
  t.insert(t.end(), scores.begin() + 2, scores.end());
  return t;
}

bool named_output(const Node& node, size_t i) { return i < node.outputs.size() && !node.outputs[i].empty(); }

void loss_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 2, 3);
  const bool sce = is_softmax_cross_entropy(node);
  if (out.empty() || out.size() > (sce ? 2u : 1u))
    throw Error(sce ? "SoftmaxCrossEntropyLoss has one or two outputs (output, log_prob)"
                    : "NegativeLogLikelihoodLoss has one output");
  const ValueInfo& scores = in[0];
  if (scores.dtype != DType::f32 && scores.dtype != DType::f64)
    throw Unsupported("dtype " + std::string(dtype_name(scores.dtype)) + " is not supported (float32 and float64 only)");
  if (scores.shape.size() < 2)
    throw Error("the scores must have rank 2 or more ([N, C, d1, ...]), got " + shape_str(scores.shape));
  if (in[1].dtype != DType::i32 && in[1].dtype != DType::i64)
    throw Error("the target must be int32 or int64, got " + std::string(dtype_name(in[1].dtype)));
  const Shape target = target_shape_of(scores.shape);
  if (in[1].shape != target)
    throw Error("the target has shape " + shape_str(in[1].shape) + ", expected " + shape_str(target) +
                " for scores of shape " + shape_str(scores.shape));
  if (has_input(in, 2)) {
    if (in[2].dtype != scores.dtype) throw Error("the weight must have the scores' dtype");
    if (in[2].shape != Shape{scores.shape[1]})
      throw Error("the weight has shape " + shape_str(in[2].shape) + ", expected one value per class (" +
                  std::to_string(scores.shape[1]) + ")");
  }
  const Reduction reduction = reduction_of(node);
  node.attr_int("ignore_index", 0);  // an Error now if present with the wrong kind
  if (named_output(node, 0)) out[0] = ValueInfo{scores.dtype, reduction == Reduction::none ? target : Shape{}};
  if (out.size() > 1 && named_output(node, 1)) out[1] = ValueInfo{scores.dtype, scores.shape};
}

// log-softmax over C of each (n, d), in double, laid out like the scores.
template <class T>
std::vector<double> log_softmax(const T* x, const LossDims& dims) {
  std::vector<double> logp(static_cast<size_t>(dims.n * dims.c * dims.d));
  for (int64_t i = 0; i < dims.n; ++i)
    for (int64_t j = 0; j < dims.d; ++j) {
      if (dims.c == 0) continue;
      double max = static_cast<double>(x[dims.score_at(i, 0, j)]);
      for (int64_t c = 1; c < dims.c; ++c) max = std::max(max, static_cast<double>(x[dims.score_at(i, c, j)]));
      double sum = 0;
      for (int64_t c = 0; c < dims.c; ++c) sum += std::exp(static_cast<double>(x[dims.score_at(i, c, j)]) - max);
      const double log_sum = std::log(sum);
      for (int64_t c = 0; c < dims.c; ++c) {
        const int64_t at = dims.score_at(i, c, j);
        logp[static_cast<size_t>(at)] = static_cast<double>(x[at]) - max - log_sum;
      }
    }
  return logp;
}

// The negative log-likelihood of log-probabilities `logp` ([N, C, D]) at the target classes,
// scaled by the class weights (1 without a weight input). A target equal to ignore_index
// contributes loss 0 and weight 0, so mean divides by the weight of the elements kept.
template <class T, class L>
void negative_log_likelihood(const Node& node, const LossDims& dims, const std::vector<double>& logp,
                             const L* target, const T* weight, T* loss) {
  const Reduction reduction = reduction_of(node);
  const bool has_ignore = node.has_attr("ignore_index");
  const int64_t ignore_index = node.attr_int("ignore_index", 0);
  double loss_sum = 0, weight_sum = 0;
  for (int64_t i = 0; i < dims.n; ++i)
    for (int64_t j = 0; j < dims.d; ++j) {
      const int64_t at = i * dims.d + j;
      const int64_t cls = static_cast<int64_t>(target[at]);
      double value = 0;
      if (!(has_ignore && cls == ignore_index)) {
        if (cls < 0 || cls >= dims.c)
          throw Error("target " + std::to_string(cls) + " is outside [0, " + std::to_string(dims.c) +
                      ") and is not ignore_index");
        const double w = weight ? static_cast<double>(weight[cls]) : 1.0;
        value = -w * logp[static_cast<size_t>(dims.score_at(i, cls, j))];
        weight_sum += w;
      }
      if (reduction == Reduction::none) loss[at] = static_cast<T>(value);
      loss_sum += value;
    }
  // A mean over no kept element is 0 / 0 = NaN, as in the ops' ONNX function bodies.
  if (reduction == Reduction::sum) loss[0] = static_cast<T>(loss_sum);
  if (reduction == Reduction::mean) loss[0] = static_cast<T>(loss_sum / weight_sum);
}

void loss_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  const Tensor& scores = *in[0];
  const Tensor& target = *in[1];
  const Tensor* weight = optional_input(in, 2);
  const LossDims dims = loss_dims(scores.shape());
  const bool sce = is_softmax_cross_entropy(node);
  Tensor* log_prob_out = out.size() > 1 ? out[1] : nullptr;
  auto run = [&](auto scalar_tag, auto label_tag) {
    using T = decltype(scalar_tag);
    using L = decltype(label_tag);
    const T* x = scores.data<T>();
    std::vector<double> logp;
    if (sce) {
      logp = log_softmax(x, dims);
      if (log_prob_out) {
        T* lp = log_prob_out->data<T>();
        for (size_t k = 0; k < logp.size(); ++k) lp[k] = static_cast<T>(logp[k]);
      }
    } else {
      logp.assign(x, x + scores.numel());  // NegativeLogLikelihoodLoss takes log-probabilities as given
    }
    // Without the loss output (an unnamed first output) there is still the validation of the targets.
    std::vector<T> scratch;
    T* loss = out[0] ? out[0]->data<T>() : nullptr;
    if (!loss) {
      scratch.resize(static_cast<size_t>(std::max<int64_t>(target.numel(), 1)));
      loss = scratch.data();
    }
    negative_log_likelihood<T, L>(node, dims, logp, target.data<L>(), weight ? weight->data<T>() : nullptr, loss);
  };
  auto with_labels = [&](auto scalar_tag) {
    if (target.dtype() == DType::i32)
      run(scalar_tag, int32_t{});
    else
      run(scalar_tag, int64_t{});
  };
  if (scores.dtype() == DType::f32)
    with_labels(float{});
  else
    with_labels(double{});
}

}  // namespace

void register_loss_ops(OpRegistry& r) {
  r.add("NegativeLogLikelihoodLoss", {loss_infer, loss_reference});
  r.add("SoftmaxCrossEntropyLoss", {loss_infer, loss_reference});
}

}  // namespace grove

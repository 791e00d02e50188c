// Einsum: parses the equation into a loop over every label, then runs the naive loop that
// multiplies one element of each input per index combination and sums into the output.
// Repeated labels in one input (diagonals, traces) fall out of adding their strides.
#include <algorithm>
#include <cctype>
#include <type_traits>

#include "ops/byte_copy.h"
#include "ops/reduce/index.h"
#include "ops/op_util.h"

namespace grove {
namespace {

// One side of the equation for one operand: its letters, and where '...' sits among them.
struct Term {
  std::string letters;
  int64_t ellipsis_at = -1;  // index into letters where the ellipsis dims go; -1 when absent
};

struct Equation {
  std::vector<Term> inputs;
  Term output;
  bool explicit_output = false;
};

Term parse_term(const std::string& text) {
  Term term;
  for (size_t i = 0; i < text.size(); ++i) {
    char c = text[i];
    if (c == '.') {
      if (text.compare(i, 3, "...") != 0) throw Error("equation has a '.' that is not part of '...'");
      if (term.ellipsis_at >= 0) throw Error("equation term '" + text + "' has more than one '...'");
      term.ellipsis_at = static_cast<int64_t>(term.letters.size());
      i += 2;
    } else if ((c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z')) {  // not isalpha: locales may widen it
      term.letters += c;
    } else {
      throw Error(std::string("equation has an invalid character '") + c + "'");
    }
  }
  return term;
}

Equation parse_equation(const Node& node) {
  if (!node.has_attr("equation")) throw Error("attribute 'equation' is required");
  std::string text;
  for (char c : node.attr_string("equation", "")) {
    if (!std::isspace(static_cast<unsigned char>(c))) text += c;
  }
  Equation eq;
  size_t arrow = text.find("->");
  std::string lhs = text.substr(0, arrow);
  if (arrow != std::string::npos) {
    std::string rhs = text.substr(arrow + 2);
    if (rhs.find_first_of(",->") != std::string::npos) throw Error("equation '" + text + "' has more than one '->' or a ',' after it");
    eq.output = parse_term(rhs);
    eq.explicit_output = true;
  }
  size_t start = 0;
  while (true) {
    size_t comma = lhs.find(',', start);
    eq.inputs.push_back(parse_term(lhs.substr(start, comma - start)));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return eq;
}

// Labels are numbered: a letter by its character code, ellipsis dim j (counted over the
// broadcast ellipsis rank) as kEllipsisLabel + j.
constexpr int kEllipsisLabel = 128;

// The loop: labels of the output first (in output order), then the summed ones.
struct EinsumPlan {
  std::vector<int64_t> sizes;                 // per loop label
  std::vector<std::vector<int64_t>> strides;  // per input, per loop label; 0 when absent or broadcast
  std::vector<int64_t> out_strides;           // per loop label
  Shape out_shape;
};

// The labels of each axis of an operand of the given rank, ellipsis expanded.
std::vector<int> axis_labels(const Term& term, size_t rank, size_t ellipsis_rank, size_t operand) {
  size_t letters = term.letters.size();
  bool fits = term.ellipsis_at >= 0 ? rank >= letters : rank == letters;
  if (!fits)
    throw Error("operand " + std::to_string(operand) + " has rank " + std::to_string(rank) + " but its term '" +
                term.letters + "' names " + std::to_string(letters) + " dims" + (term.ellipsis_at >= 0 ? " besides '...'" : ""));
  std::vector<int> labels;
  size_t own_ellipsis = rank - letters;
  for (size_t i = 0; i <= letters; ++i) {
    if (static_cast<int64_t>(i) == term.ellipsis_at)  // right-aligned against the widest ellipsis
      for (size_t j = 0; j < own_ellipsis; ++j) labels.push_back(kEllipsisLabel + static_cast<int>(ellipsis_rank - own_ellipsis + j));
    if (i < letters) labels.push_back(static_cast<unsigned char>(term.letters[i]));
  }
  return labels;
}

EinsumPlan plan_einsum(const Node& node, const std::vector<Shape>& shapes) {
  Equation eq = parse_equation(node);
  if (eq.inputs.size() != shapes.size())
    throw Error("equation has " + std::to_string(eq.inputs.size()) + " operand terms for " + std::to_string(shapes.size()) + " inputs");
  size_t ellipsis_rank = 0;
  for (size_t t = 0; t < shapes.size(); ++t)
    if (eq.inputs[t].ellipsis_at >= 0 && shapes[t].size() >= eq.inputs[t].letters.size())
      ellipsis_rank = std::max(ellipsis_rank, shapes[t].size() - eq.inputs[t].letters.size());

  // Size of each label; size-1 dims broadcast against larger ones across operands, as in numpy.
  std::vector<int64_t> size(kEllipsisLabel + ellipsis_rank, -1);
  std::vector<int> count(size.size(), 0);
  std::vector<std::vector<int>> labels(shapes.size());
  for (size_t t = 0; t < shapes.size(); ++t) {
    labels[t] = axis_labels(eq.inputs[t], shapes[t].size(), ellipsis_rank, t);
    std::vector<int64_t> own(size.size(), -1);
    for (size_t a = 0; a < labels[t].size(); ++a) {
      size_t l = static_cast<size_t>(labels[t][a]);
      int64_t dim = shapes[t][a];
      if (own[l] >= 0 && own[l] != dim)
        throw Error("operand " + std::to_string(t) + " repeats label '" + std::string(1, static_cast<char>(l)) +
                    "' over dims of different sizes " + std::to_string(own[l]) + " and " + std::to_string(dim));
      own[l] = dim;
      ++count[l];
      if (size[l] < 0 || size[l] == 1) size[l] = dim;
      else if (dim != 1 && dim != size[l])
        throw Error("a label spans dims of sizes " + std::to_string(size[l]) + " and " + std::to_string(dim) + " that do not broadcast");
    }
  }

  std::vector<int> out_labels;
  if (eq.explicit_output) {
    if (eq.output.ellipsis_at < 0 && ellipsis_rank > 0)
      throw Error("the output has no '...' but the inputs' '...' covers " + std::to_string(ellipsis_rank) + " dims");
    out_labels = axis_labels(eq.output, eq.output.letters.size() + ellipsis_rank, ellipsis_rank, 0);
    std::vector<bool> seen(size.size(), false);
    for (int l : out_labels) {
      if (count[static_cast<size_t>(l)] == 0)
        throw Error("output label '" + std::string(1, static_cast<char>(l)) + "' appears in no input");
      if (seen[static_cast<size_t>(l)]) throw Error("output label '" + std::string(1, static_cast<char>(l)) + "' appears twice");
      seen[static_cast<size_t>(l)] = true;
    }
  } else {
    // Implicit output: the ellipsis dims, then the letters used exactly once, alphabetically.
    for (size_t j = 0; j < ellipsis_rank; ++j) out_labels.push_back(kEllipsisLabel + static_cast<int>(j));
    for (int l = 0; l < kEllipsisLabel; ++l)
      if (count[static_cast<size_t>(l)] == 1) out_labels.push_back(l);
  }

  std::vector<int> loop = out_labels;
  for (size_t l = 0; l < size.size(); ++l)
    if (count[l] > 0 && std::find(out_labels.begin(), out_labels.end(), static_cast<int>(l)) == out_labels.end())
      loop.push_back(static_cast<int>(l));
  std::vector<size_t> loop_index(size.size(), 0);
  for (size_t i = 0; i < loop.size(); ++i) loop_index[static_cast<size_t>(loop[i])] = i;

  EinsumPlan plan;
  for (int l : loop) plan.sizes.push_back(size[static_cast<size_t>(l)]);
  for (int l : out_labels) plan.out_shape.push_back(size[static_cast<size_t>(l)]);
  checked_numel(node, plan.sizes);  // the iteration count must not overflow
  plan.out_strides.assign(loop.size(), 0);
  std::vector<int64_t> out_strides = strides_of(plan.out_shape);
  for (size_t i = 0; i < out_labels.size(); ++i) plan.out_strides[i] = out_strides[i];
  for (size_t t = 0; t < shapes.size(); ++t) {
    std::vector<int64_t> own = strides_of(shapes[t]), strides(loop.size(), 0);
    for (size_t a = 0; a < labels[t].size(); ++a) {
      size_t l = static_cast<size_t>(labels[t][a]);
      if (shapes[t][a] == 1 && size[l] != 1) continue;  // broadcast: always read index 0
      strides[loop_index[l]] += own[a];                 // repeated labels add up: a diagonal
    }
    plan.strides.push_back(std::move(strides));
  }
  return plan;
}

void einsum_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 1, -1);
  std::vector<Shape> shapes;
  for (const auto& v : in) {
    if (!v.present) throw Error("inputs must not be empty names");
    if (v.dtype != in[0].dtype) throw Error("inputs have different dtypes");
    shapes.push_back(v.shape);
  }
  require_arithmetic(in[0].dtype);
  out[0] = ValueInfo{in[0].dtype, plan_einsum(node, shapes).out_shape};
}

template <class T>
void einsum_loop(const EinsumPlan& p, std::span<const Tensor* const> in, Tensor& out) {
  // Floats sum in double so the oracle loses no precision over long reductions.
  using Acc = std::conditional_t<std::is_floating_point_v<T>, double, T>;
  std::vector<Acc> acc(static_cast<size_t>(out.numel()), Acc(0));
  std::vector<const T*> data;
  for (const Tensor* t : in) data.push_back(t->data<T>());
  size_t labels = p.sizes.size();
  int64_t total = numel(p.sizes);
  std::vector<int64_t> pos(labels, 0), offsets(in.size(), 0);
  int64_t out_offset = 0;
  for (int64_t iter = 0; iter < total; ++iter) {
    Acc product = Acc(1);
    for (size_t t = 0; t < data.size(); ++t) product = static_cast<Acc>(product * static_cast<Acc>(data[t][offsets[t]]));
    acc[static_cast<size_t>(out_offset)] = static_cast<Acc>(acc[static_cast<size_t>(out_offset)] + product);
    for (size_t l = labels; l-- > 0;) {  // odometer step, updating offsets incrementally
      bool wrapped = ++pos[l] == p.sizes[l];
      int64_t step = wrapped ? 1 - p.sizes[l] : 1;
      for (size_t t = 0; t < data.size(); ++t) offsets[t] += step * p.strides[t][l];
      out_offset += step * p.out_strides[l];
      if (!wrapped) break;
      pos[l] = 0;
    }
  }
  T* ys = out.data<T>();
  for (size_t k = 0; k < acc.size(); ++k) ys[k] = static_cast<T>(acc[k]);
}

void einsum_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  std::vector<Shape> shapes;
  for (const Tensor* t : in) shapes.push_back(t->shape());
  EinsumPlan plan = plan_einsum(node, shapes);
  visit_dtype(out[0]->dtype(), [&](auto tag) { einsum_loop<decltype(tag)>(plan, in, *out[0]); });
}

}  // namespace

void register_einsum_ops(OpRegistry& r) { r.add("Einsum", {einsum_infer, einsum_reference}); }

}  // namespace grove

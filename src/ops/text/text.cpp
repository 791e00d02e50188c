// TfIdfVectorizer: counts the n-grams of a pool in each row of token ids. A naive reference:
// for every n-gram length and skip distance it walks every start position and looks the
// n-gram up in a map built from the pool. Token ids only; string tokens are a dtype grove
// does not hold.
#include <algorithm>
#include <map>
#include <string>
#include <vector>

#include "ops/byte_copy.h"
#include "ops/op_util.h"

namespace grove {
namespace {

// Far more n-grams than any vocabulary holds.
constexpr int64_t kMaxOutputs = int64_t{1} << 24;

enum class TfIdfMode { tf, idf, tfidf };

struct TfIdfPlan {
  TfIdfMode mode = TfIdfMode::tf;
  int64_t min_n = 1, max_n = 1, max_skip = 0;
  int64_t out_size = 0;
  std::map<std::vector<int64_t>, int64_t> slot;  // n-gram -> output index
  std::vector<float> weights;                    // per output index; empty: all 1
};

TfIdfPlan plan_tfidf(const Node& node) {
  TfIdfPlan p;
  std::string mode = node.attr_string("mode", "");
  if (mode == "TF") p.mode = TfIdfMode::tf;
  else if (mode == "IDF") p.mode = TfIdfMode::idf;
  else if (mode == "TFIDF") p.mode = TfIdfMode::tfidf;
  else throw Error("mode must be TF, IDF or TFIDF, got '" + mode + "'");
  p.min_n = node.attr_int("min_gram_length", 0);
  p.max_n = node.attr_int("max_gram_length", 0);
  p.max_skip = node.attr_int("max_skip_count", 0);
  if (p.min_n < 1 || p.max_n < p.min_n)
    throw Error("gram lengths must satisfy 1 <= min_gram_length <= max_gram_length, got " + std::to_string(p.min_n) +
                " and " + std::to_string(p.max_n));
  if (p.max_skip < 0) throw Error("max_skip_count must be >= 0, got " + std::to_string(p.max_skip));
  if (node.has_attr("pool_strings")) throw Unsupported("string pools (pool_strings) are not supported");
  std::vector<int64_t> pool = node.attr_ints("pool_int64s");
  std::vector<int64_t> starts = node.attr_ints("ngram_counts");
  std::vector<int64_t> indexes = node.attr_ints("ngram_indexes");
  // starts[k] is where the (k+1)-grams begin in the pool; each length runs to the next start.
  size_t gram = 0;
  for (size_t k = 0; k < starts.size(); ++k) {
    int64_t n = static_cast<int64_t>(k) + 1;
    int64_t begin = starts[k], end = k + 1 < starts.size() ? starts[k + 1] : static_cast<int64_t>(pool.size());
    if (begin < 0 || end < begin || end > static_cast<int64_t>(pool.size()) || (end - begin) % n != 0)
      throw Error("ngram_counts " + std::to_string(begin) + ".." + std::to_string(end) + " for " + std::to_string(n) +
                  "-grams does not cut the pool of " + std::to_string(pool.size()) + " ids into whole n-grams");
    for (int64_t at = begin; at < end; at += n, ++gram) {
      if (gram >= indexes.size()) throw Error("ngram_indexes has fewer entries than the pool has n-grams");
      int64_t index = indexes[gram];
      // The output holds one entry per index, so a hostile index must not size it.
      if (index < 0 || index >= kMaxOutputs)
        throw Error("ngram_indexes holds " + std::to_string(index) + ", outside [0, " + std::to_string(kMaxOutputs) + ")");
      p.slot[std::vector<int64_t>(pool.begin() + at, pool.begin() + at + n)] = index;
      p.out_size = std::max(p.out_size, index + 1);
    }
  }
  if (node.has_attr("weights")) {
    std::vector<float> w = node.attr_floats("weights");
    if (static_cast<int64_t>(w.size()) < p.out_size)
      throw Error("weights has " + std::to_string(w.size()) + " entries, fewer than the " + std::to_string(p.out_size) +
                  " outputs");
    p.weights = std::move(w);
  }
  return p;
}

void tfidf_infer(const Node& node, std::span<const ValueInfo> in, std::span<ValueInfo> out) {
  require_inputs(node, in.size(), 1, 1);
  if (in[0].dtype == DType::string) throw Unsupported("string tokens are not supported");
  if (in[0].dtype != DType::i32 && in[0].dtype != DType::i64)
    throw Error("input must be int32 or int64 token ids, got " + std::string(dtype_name(in[0].dtype)));
  const Shape& s = in[0].shape;
  if (s.size() != 1 && s.size() != 2) throw Error("input must be [C] or [N, C], got shape " + shape_str(s));
  TfIdfPlan p = plan_tfidf(node);
  Shape out_shape = s.size() == 1 ? Shape{p.out_size} : Shape{s[0], p.out_size};
  checked_numel(node, out_shape);
  out[0] = ValueInfo{DType::f32, out_shape};
}

void tfidf_reference(const Node& node, std::span<const Tensor* const> in, std::span<Tensor* const> out) {
  TfIdfPlan p = plan_tfidf(node);
  if (out[0]->numel() == 0) return;  // e.g. no n-grams: the row count may still be huge
  std::vector<int64_t> ids = in[0]->to_i64();
  const int64_t rows = in[0]->rank() == 1 ? 1 : in[0]->dim(0);
  const int64_t cols = in[0]->shape().back();
  float* ys = out[0]->data<float>();
  std::vector<int64_t> gram;
  for (int64_t r = 0; r < rows; ++r) {
    const int64_t* row = ids.data() + r * cols;
    std::vector<double> counts(static_cast<size_t>(p.out_size), 0.0);
    for (int64_t n = p.min_n; n <= p.max_n; ++n) {
      // A 1-gram is the same at every skip distance: count it once.
      int64_t skips = n == 1 ? 0 : p.max_skip;
      for (int64_t skip = 0; skip <= skips; ++skip) {
        int64_t step = skip + 1;
        if ((n - 1) > (cols - 1) / step) break;  // the n-gram does not fit in the row at this step
        for (int64_t start = 0; start + (n - 1) * step < cols; ++start) {
          gram.clear();
          for (int64_t k = 0; k < n; ++k) gram.push_back(row[start + k * step]);
          auto hit = p.slot.find(gram);
          if (hit != p.slot.end()) counts[static_cast<size_t>(hit->second)] += 1;
        }
      }
    }
    for (int64_t i = 0; i < p.out_size; ++i) {
      double c = counts[static_cast<size_t>(i)];
      double w = p.weights.empty() ? 1.0 : p.weights[static_cast<size_t>(i)];
      double v = p.mode == TfIdfMode::tf ? c : p.mode == TfIdfMode::idf ? (c > 0 ? w : 0.0) : c * w;
      ys[r * p.out_size + i] = static_cast<float>(v);
    }
  }
}

}  // namespace

void register_text_ops(OpRegistry& r) { r.add("TfIdfVectorizer", {tfidf_infer, tfidf_reference}); }

}  // namespace grove

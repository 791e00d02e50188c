#include "profile/sampled_layouts.h"

#include <iterator>

#include "grove/model.h"
#include "kernels/cpu_info.h"
#include "ops/op_names.h"
#include "profile/small_graphs.h"
#include "runtime/model.h"

namespace grove::profile {
namespace {

// The input shape and permutation of the Transpose that makes change `k` of a value `s`
// ([1, C, H, W]); blocked values are viewed with the block as a dimension of its own, as the
// plan's Reshape views them.
std::pair<Shape, std::vector<int64_t>> transpose_for(size_t k, const Shape& s, int64_t b) {
  const int64_t n = s[0], c = s[1], h = s[2], w = s[3];
  switch (k) {
    case 0: return {{n, c, h, w}, {0, 2, 3, 1}};              // nchw_to_nhwc
    case 1: return {{n, h, w, c}, {0, 3, 1, 2}};              // nhwc_to_nchw
    case 2: return {{n, c / b, b, h, w}, {0, 1, 3, 4, 2}};    // nchw_to_blocked
    case 3: return {{n, c / b, h, w, b}, {0, 1, 4, 2, 3}};    // blocked_to_nchw
    case 4: return {{n, h, w, c / b, b}, {0, 3, 1, 2, 4}};    // nhwc_to_blocked
    default: return {{n, c / b, h, w, b}, {0, 2, 3, 1, 4}};   // blocked_to_nhwc
  }
}

Graph transpose_graph(const Shape& in, const std::vector<int64_t>& perm) {
  Graph g = one_input_graph("sampled_layout_change", in);
  Node t = opset13_node("transpose", kTranspose, {"x"}, {"y"});
  set_ints(t, "perm", perm);
  g.nodes.push_back(std::move(t));
  return g;
}

}  // namespace

Shape sample_value(std::mt19937_64& rng) {
  static constexpr int64_t kPlanes[] = {7, 10, 13, 14, 19, 20, 26, 28, 38, 40, 52, 56, 76, 80, 104, 112};
  for (;;) {
    const int64_t c = int64_t{16} << (rng() % 7), plane = kPlanes[rng() % std::size(kPlanes)];
    const int64_t channels = rng() % 3 == 0 ? c * 3 / 2 : c;
    if (channels * plane * plane <= (int64_t{16} << 20)) return {1, channels, plane, plane};
  }
}

std::vector<tune::LayoutRow> profile_layout_changes(Engine& engine, const Shape& nchw, int64_t block,
                                                    const ProfileSettings& settings) {
  std::vector<tune::LayoutRow> rows;
  for (size_t k = 0; k < tune::layout_changes().size(); ++k) {
    const auto [in, perm] = transpose_for(k, nchw, block);
    Tensor x(DType::f32, in);
    for (int64_t i = 0; i < x.numel(); ++i) x.data<float>()[i] = float(i % 251) * 0.01f;
    Session session(engine, model_from_graph(transpose_graph(in, perm), {{"x", in}}), SessionOptions{.tuning = "off"});
    const std::shared_ptr<const Plan> plan = plan_for(session, {{"x", in}});
    if (!plan) throw Error("tune: a Transpose of a fixed shape has no plan");
    const std::vector<double> us = node_median_us(engine, session, *plan, {{"x", x}}, settings);
    double total = 0;
    for (size_t n = 0; n < plan->graph.nodes.size(); ++n) total += us[n];
    if (total > 0) rows.push_back({kernels::machine_key(), engine.threads(), tune::layout_changes()[k], nchw, total});
  }
  return rows;
}

}  // namespace grove::profile

#include "dynamic/resize_layers.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>

#include "dynamic/channel_flow.h"
#include "graph/error.h"

namespace grove {
namespace {

// The output channels of `weight` along `axis` with the largest L1 norms, `keep` of them, in
// their original order (ties: the lower index).
std::vector<int64_t> largest_l1(const Tensor& weight, int64_t axis, int64_t keep) {
  const int64_t width = weight.dim(axis);
  int64_t outer = 1, inner = 1;
  for (int64_t i = 0; i < axis; ++i) outer *= weight.dim(i);
  for (int64_t i = axis + 1; i < weight.rank(); ++i) inner *= weight.dim(i);
  const std::vector<double> w = weight.to_f64();
  std::vector<double> l1(static_cast<size_t>(width), 0.0);
  for (int64_t o = 0; o < outer; ++o)
    for (int64_t c = 0; c < width; ++c)
      for (int64_t k = 0; k < inner; ++k) l1[c] += std::abs(w[static_cast<size_t>((o * width + c) * inner + k)]);
  std::vector<int64_t> order(static_cast<size_t>(width));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return l1[a] > l1[b]; });
  order.resize(static_cast<size_t>(keep));
  std::sort(order.begin(), order.end());
  return order;
}

// One layer set to `channels` output channels, followed through its readers.
class WidthChange : public ChannelFollower {
 public:
  WidthChange(const Graph& g, std::string layer, int64_t channels, uint64_t seed)
      : ChannelFollower(g, "", "resized", seed), layer_(std::move(layer)), channels_(channels) {
    // A tensor read in one place is rewritten under its own name; one read in several (a
    // shared weight, a graph input's default) gets a new name for the reader that changes.
    for (const Node& n : in_.nodes) {
      for (const auto& v : n.inputs) ++reads_[v];
      for (const auto& v : n.captures) ++reads_[v];
    }
    for (const auto& o : in_.outputs) reads_[o.name] += 2;
    for (const auto& d : in_.defaults) reads_[d.name] += 2;
  }

  Graph run() { return follow(); }

 private:
  std::optional<std::vector<int64_t>> layer_output(const Node& original, const Tensor& weight, int64_t axis) override {
    const int64_t full = weight.dim(axis);
    if (channel_layer_name(original) != layer_ || channels_ == full) return std::nullopt;
    if (channels_ < full) return largest_l1(weight, axis, channels_);
    std::vector<int64_t> idx(static_cast<size_t>(full));
    std::iota(idx.begin(), idx.end(), 0);
    idx.resize(static_cast<size_t>(channels_), kNewChannel);
    return idx;
  }

  std::string rewritten_name(const std::string& name) override {
    if (reads_[name] <= 1) return name;
    std::string fresh;
    do fresh = name + ".resized" + std::to_string(serial_++);
    while (out_.initializers.count(fresh) || reads_.count(fresh));
    return fresh;
  }

  std::string layer_;
  int64_t channels_;
  std::map<std::string, int> reads_;
};

const Node* find_layer(const Graph& g, const std::string& name) {
  for (const Node& n : g.nodes)
    if (is_channel_layer(g, n) && (channel_layer_name(n) == name || n.inputs[1] == name)) return &n;
  return nullptr;
}

int64_t width_of(const Graph& g, const Node& n) {
  return g.initializers.at(n.inputs[1]).dim(channel_layer_weight_axis(n));
}

}  // namespace

std::vector<ChannelLayer> channel_layers(const Graph& g) {
  std::vector<ChannelLayer> layers;
  for (const Node& n : g.nodes)
    if (is_channel_layer(g, n)) layers.push_back({channel_layer_name(n), width_of(g, n)});
  return layers;
}

ResizedGraph resize_layers(const Graph& imported, const std::vector<LayerResize>& wanted, uint64_t seed) {
  ResizedGraph r{imported, {}};
  for (size_t k = 0; k < wanted.size(); ++k) {
    const LayerResize& w = wanted[k];
    ResizeOutcome o{w.layer, 0, w.channels, ""};
    const Node* node = find_layer(r.graph, w.layer);
    if (!node) {
      o.skipped = "no Conv (one group), Gemm or MatMul with constant weights of this name in the model as written";
    } else if (w.channels < 1) {
      o.from = width_of(r.graph, *node);
      o.skipped = "a layer keeps at least one channel";
    } else {
      o.from = width_of(r.graph, *node);
      const std::string name = channel_layer_name(*node);
      try {
        if (o.from != o.to) r.graph = WidthChange(r.graph, name, w.channels, seed + k).run();
      } catch (const Error& e) {
        o.skipped = e.what();
      }
    }
    r.layers.push_back(o);
  }
  return r;
}

}  // namespace grove

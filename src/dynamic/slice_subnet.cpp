#include "dynamic/slice_subnet.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <numeric>
#include <optional>
#include <set>

#include "dynamic/channel_flow.h"
#include "graph/error.h"

namespace grove {
namespace {

// A sub-net's change: each layer keeps a prefix of its output channels (a ratio of them, or
// the sub-net's count), exempt layers keep all; initializers named NAME@SUBNET replace NAME.
class Slicer : public ChannelFollower {
 public:
  Slicer(const Graph& imported, const DynamicSpec& spec, const SubnetSpec& subnet)
      : ChannelFollower(imported, "sub-net '" + subnet.name + "'", "sliced"), spec_(spec), subnet_(subnet) {
    apply_overrides();
    find_layers();
  }

  SlicedSubnet run() {
    SlicedSubnet s;
    s.graph = follow();
    s.layers = std::move(layers_);
    return s;
  }

 private:
  // Initializers named NAME@SUBNET replace NAME in that sub-net; every such variant is
  // dropped from every sub-net's graph.
  void apply_overrides() {
    std::set<std::string> names;
    for (const auto& s : spec_.subnets) names.insert(s.name);
    auto& inits = out_.initializers;
    for (auto it = inits.begin(); it != inits.end();) {
      const auto at = it->first.rfind('@');
      if (at == std::string::npos || !names.count(it->first.substr(at + 1))) {
        ++it;
        continue;
      }
      const std::string base = it->first.substr(0, at);
      if (it->first.substr(at + 1) == subnet_.name) {
        if (!inits.count(base)) throw fail("initializer '" + it->first + "' overrides '" + base + "', which the model lacks");
        overridden_[base] = it->second;
      }
      it = inits.erase(it);
    }
  }

  void find_layers() {
    std::vector<const Node*> layers;
    for (const auto& n : in_.nodes)
      if (is_channel_layer(in_, n)) layers.push_back(&n);
    if (layers.empty()) throw fail("the model has no Conv, Gemm or MatMul with constant weights to slice");
    std::map<std::string, const Node*> by_name;
    for (const Node* n : layers) {
      by_name[n->name] = n;
      by_name[n->inputs[1]] = n;
    }
    auto lookup = [&](const std::string& name, const char* where) {
      auto it = by_name.find(name);
      if (it == by_name.end()) {
        std::string known;
        for (size_t i = 0; i < layers.size() && i < 12; ++i) known += (i ? ", " : "") + channel_layer_name(*layers[i]);
        throw fail(std::string(where) + " names unknown layer '" + name + "' (layers: " + known +
                   (layers.size() > 12 ? ", ..." : "") + ")");
      }
      return it->second;
    };
    if (spec_.exempt_given) {
      for (const auto& e : spec_.exempt) exempt_.insert(lookup(e, "the exempt list"));
    } else {
      exempt_.insert(layers.back());
    }
    for (const auto& [name, count] : subnet_.channels) wanted_[lookup(name, "its channel list")] = count;
  }

  // Output channels a layer keeps in this sub-net.
  int64_t kept_channels(const Node& n, int64_t full) const {
    if (exempt_.count(&n)) {
      if (wanted_.count(&n)) throw fail(n, "is exempt but the sub-net gives it a channel count");
      return full;
    }
    if (!subnet_.channels.empty()) {
      auto it = wanted_.find(&n);
      if (it == wanted_.end()) return full;
      if (it->second > full)
        throw fail(n, "keeps " + std::to_string(it->second) + " channels but the layer has " + std::to_string(full));
      return it->second;
    }
    return std::clamp<int64_t>(std::llround(subnet_.ratio * static_cast<double>(full)), 1, full);
  }

  std::optional<std::vector<int64_t>> layer_output(const Node& original, const Tensor& weight, int64_t axis) override {
    const int64_t full = weight.dim(axis);
    const int64_t kept = kept_channels(original, full);
    layers_.push_back(LayerWidth{channel_layer_name(original), full, kept});
    if (kept == full) return std::nullopt;
    std::vector<int64_t> idx(static_cast<size_t>(kept));
    std::iota(idx.begin(), idx.end(), 0);
    return idx;
  }

  const Tensor* replacement(const std::string& name) const override {
    auto it = overridden_.find(name);
    return it == overridden_.end() ? nullptr : &it->second;
  }

  // An input that names an overridden initializer and was not sliced reads the override.
  void after_node(Node& n) override {
    for (auto& input : n.inputs) {
      auto over = overridden_.find(input);
      if (over == overridden_.end()) continue;
      const std::string new_name = input + "@" + subnet_.name;
      out_.initializers[new_name] = over->second;
      input = new_name;
    }
  }

  std::string rewritten_name(const std::string& name) override {
    return name + "@" + subnet_.name + "#" + std::to_string(serial_++);
  }

  std::string advice(Advice kind, const std::string& layer) const override {
    switch (kind) {
      case Advice::unsupported: return "; mark the layer that feeds it exempt";
      case Advice::output: return ": mark layer '" + layer + "' exempt";
      case Advice::differently: return "; give both layers the same channels or exempt them";
      case Advice::mixes: return "; exempt that layer or slice both sides alike";
    }
    return "";
  }

  const DynamicSpec& spec_;
  const SubnetSpec& subnet_;
  std::vector<LayerWidth> layers_;
  std::map<std::string, Tensor> overridden_;
  std::set<const Node*> exempt_;
  std::map<const Node*, int64_t> wanted_;
};

}  // namespace

SlicedSubnet slice_subnet(const Graph& imported, const DynamicSpec& spec, const SubnetSpec& subnet) {
  return Slicer(imported, spec, subnet).run();
}

}  // namespace grove

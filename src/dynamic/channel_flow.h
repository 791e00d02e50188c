#pragma once
// Follows a change of layers' output channels through every op that reads them: a layer (Conv
// of one group, Gemm, MatMul with a constant 2-D weight) gets new output channels, each value
// downstream carries which of its channels remain (or are new), and each reader takes the
// matching slice of its weights, until a layer consumes the channels. Two users: sub-nets
// (dynamic/slice_subnet.h) keep a prefix of each layer's channels; `grove tail --apply`
// (dynamic/resize_layers.h) prunes or grows one layer at a time. What cannot be followed (an op
// without a channel rule, a residual mixing changed and unchanged channels, a graph output) is
// an Error naming the node.
#include <cstdint>
#include <map>
#include <optional>
#include <random>
#include <string>
#include <vector>

#include "graph/graph.h"

namespace grove {

// A channel of a changed value that no channel of the original is: one the change adds.
inline constexpr int64_t kNewChannel = -1;

// A value's channels after a change, along `axis`: for each channel of the new value the
// original channel it is (an index below `full`) or kNewChannel. A value without a map keeps
// its channels.
struct ChannelMap {
  int64_t axis = 0;
  int64_t full = 0;
  std::vector<int64_t> idx;
  std::string layer;  // the layer whose change this comes from, for messages
  bool same_channels(const ChannelMap& o) const { return axis == o.axis && full == o.full && idx == o.idx; }
  bool adds_channels() const;
};

// A layer whose output channels a change may set: a Conv of one group, or a Gemm or MatMul,
// with a constant weight (2-D for MatMul).
bool is_channel_layer(const Graph& g, const Node& n);
// A layer's name in messages and lists: its node name, or its weight's when the node has none.
std::string channel_layer_name(const Node& n);
// The axis of a layer's weight (input 1) that holds its output channels.
int64_t channel_layer_weight_axis(const Node& n);

// What a tensor widened by a change holds in its new entries. Growing must not change what
// the model computes: a reader's weights of new channels are zero, while the layer's own
// weights of them are small and random, so that training can move them.
enum class NewEntries { zero, one, small_random };

class ChannelFollower {
 public:
  virtual ~ChannelFollower() = default;

 protected:
  // `context` starts every message ("sub-net 'w50'"; empty for none); `changed` is what the
  // messages call changed channels ("sliced", "resized"). `seed` seeds the small random entries.
  ChannelFollower(const Graph& imported, std::string context, std::string changed, uint64_t seed = 0);

  // Follows every node and returns the rewritten graph (its unused initializers dropped).
  Graph follow();

  // The channels layer `original` keeps of its `weight`'s `axis` (indices, kNewChannel for an
  // added one); nullopt leaves the layer as it is.
  virtual std::optional<std::vector<int64_t>> layer_output(const Node& original, const Tensor& weight, int64_t axis) = 0;
  // A tensor this graph holds under `name` instead of the imported initializer (a sub-net's
  // private variant), or nullptr.
  virtual const Tensor* replacement(const std::string&) const { return nullptr; }
  // Called after each node is followed (a sub-net points remaining inputs at its variants).
  virtual void after_node(Node&) {}
  // The name a rewritten initializer is stored under.
  virtual std::string rewritten_name(const std::string& name) = 0;
  enum class Advice { unsupported, output, differently, mixes };
  // What a message of this kind ends with (how to avoid the error), about the layer named.
  virtual std::string advice(Advice, const std::string& /*layer*/) const { return ""; }

  Error fail(const std::string& what) const;
  Error fail(const Node& n, const std::string& what) const;
  const Tensor* constant(const std::string& name) const;

  Graph in_;   // the graph as imported, with Identity-passed weights folded into initializers
  Graph out_;  // the graph being rewritten
  int serial_ = 0;

 private:
  const Shape* shape_of(const std::string& name) const;
  int64_t rank_of(const Node& n, const std::string& name) const;
  const ChannelMap* map_of(const std::string& v) const;
  void slice_input(Node& n, size_t i, int64_t axis, const std::vector<int64_t>& idx, NewEntries fill);
  Tensor gather(const Node& n, const Tensor& src, int64_t axis, const std::vector<int64_t>& idx, NewEntries fill);
  void follow_node(Node& n);
  Error unsupported(const Node& n) const;
  void pass(const Node& n, ChannelMap m);
  void follow_conv(Node& n);
  void follow_layer_output(Node& n, int64_t w_axis, size_t bias_input, int64_t out_axis);
  void follow_matmul(Node& n);
  void follow_batchnorm(Node& n);
  void follow_elementwise(Node& n);
  void follow_concat(Node& n);
  void follow_flatten(Node& n);
  void follow_transpose(Node& n);
  void follow_reduce(Node& n);
  void refuse_mixing_new_channels(const Node& n) const;
  void drop_unused_initializers();

  std::string context_, changed_;
  Graph bound_;  // shapes of the original, for ranks and inner sizes
  std::map<std::string, ChannelMap> maps_;
  std::mt19937_64 rng_;
  const Node* current_ = nullptr;  // the imported node being followed
};

}  // namespace grove

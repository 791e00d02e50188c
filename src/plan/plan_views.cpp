// Views: a Reshape, Flatten, Squeeze or Unsqueeze (or a Transpose that only moves size-1
// dims) keeps every element at its flat offset, so its output can share its input's buffer
// instead of being copied (tensors are dense and row-major, so such a relabelling is always
// contiguous).
//
// Design, the simplest one that is correct for every reshape: a view node keeps one no-work
// tile that depends on every tile of its input's producer (its `needs` is the whole input)
// and that consumers depend on as usual. A reshape's consumer tile region maps back to a box
// of the base only in some cases, so finer edges would need per-op region algebra; the cost
// of the coarse edge is that the view's consumers wait for the whole base instead of their
// part of it, i.e. a one-op barrier at each view. The buffer rule (PlannedRun): the view holds
// one use of its base until the view itself is released, so the base's buffer lives until the
// view's last consumer is done. Not a view: a graph output of a value something else reads
// or of a graph input (it would share a buffer with an input or another output that callers
// may write to), a view of an initializer (constant folding already handled those), or a
// dtype change. A graph output is a view of an intermediate value that only it reads (or of
// a chain of views, each read only by the next): the caller then holds that buffer alone,
// and the pool takes it back only once the caller drops it (GPT-2's logits Reshape was a
// 51 MB copy, 5% of a bf16 run).
//
// Slices go the other way: a channels-last Concat's inputs written by their producers straight
// into channel slices of the Concat's buffer, so the Concat copies nothing (SqueezeNet's fire
// modules, GoogLeNet's inception blocks). Such an input is not a dense tensor of its own, so
// only a producer whose rule writes it so (TileRule::writes_channel_slice) gets one, and the
// value must have no other reader. The Concat keeps its tiles and their edges (its readers
// still wait only for the rows they read) and those tiles do nothing (is_gathered_node). The
// buffer rule: each slice holds one use of the Concat's value until the slice is released.
#include <algorithm>

#include "ops/conv/channels_last.h"
#include "ops/op.h"
#include "ops/op_names.h"
#include "ops/tiling.h"
#include "plan/plan_internal.h"

namespace grove::plan_detail {
namespace {

bool relabels(const Node& node, const Shape& in) {
  if (!node.domain.empty() || node.outputs.size() != 1) return false;
  const OpSpec* spec = OpRegistry::builtin().find(node);
  if (spec && spec->traits.view) return true;
  if (node.op_type != kTranspose) return false;
  // Only size-1 dims move: the other dims keep their order.
  std::vector<int64_t> perm = node.attr_ints("perm");
  if (perm.size() != in.size()) return false;
  int64_t last = -1;
  for (int64_t p : perm) {
    if (p < 0 || p >= static_cast<int64_t>(in.size())) return false;
    if (in[static_cast<size_t>(p)] == 1) continue;
    if (p < last) return false;
    last = p;
  }
  return true;
}

// Whether a graph output made from value v may share v's buffer: v, and each value it is a
// view of in turn, is read only by the next link of the chain, is no graph output, and the
// chain ends at a value a node makes (not a graph input). A decoder step's new keys come
// out of Split -> Reshape -> Transpose (moving the one new position): two views.
bool read_only_here(const Plan& plan, const std::vector<int32_t>& readers, int32_t v) {
  for (; v >= 0; v = plan.values[static_cast<size_t>(v)].view_of) {
    const PlannedValue& x = plan.values[static_cast<size_t>(v)];
    if (x.is_output || readers[static_cast<size_t>(v)] != 1) return false;
    if (x.view_of < 0) return x.producer >= 0;
  }
  return false;
}

}  // namespace

void mark_views(Plan& plan) {
  std::vector<int32_t> readers(plan.values.size(), 0);  // nodes reading each value
  for (const auto& inputs : plan.node_inputs)
    for (int32_t v : inputs)
      if (v >= 0) ++readers[static_cast<size_t>(v)];
  for (size_t n = 0; n < plan.graph.nodes.size(); ++n) {
    const Node& node = plan.graph.nodes[n];
    if (node.inputs.empty() || plan.node_outputs[n].size() != 1) continue;
    const int32_t base = plan.node_inputs[n][0], out = plan.node_outputs[n][0];
    if (base < 0 || out < 0) continue;
    const PlannedValue &b = plan.values[base], &v = plan.values[out];
    if (b.dtype != v.dtype || numel(b.shape) != numel(v.shape)) continue;
    if (v.is_output && !read_only_here(plan, readers, base)) continue;
    if (relabels(node, b.shape)) plan.values[out].view_of = base;
  }
}

void mark_concat_slices(Plan& plan, TileRuleLookup lookup) {
  Graph& g = plan.graph;
  std::vector<int32_t> reads(plan.values.size(), 0);  // (node, input slot) pairs reading each value
  for (const auto& inputs : plan.node_inputs)
    for (int32_t v : inputs)
      if (v >= 0) ++reads[static_cast<size_t>(v)];
  for (size_t n = 0; n < g.nodes.size(); ++n) {
    const Node& concat = g.nodes[n];
    if (concat.op_type != kConcat || !concat.domain.empty() || plan.node_outputs[n].size() != 1) continue;
    const int32_t out = plan.node_outputs[n][0];
    if (out < 0 || plan.values[out].view_of >= 0 || plan.values[out].dtype != DType::f32) continue;
    const Shape& y = plan.values[out].shape;
    const auto rank = static_cast<int64_t>(y.size());
    int64_t axis = concat.attr_int("axis", 0);
    if (axis < 0) axis += rank;
    if (rank != 4 || axis != rank - 1) continue;
    const auto& ins = plan.node_inputs[n];
    auto can_be_slice = [&](int32_t v) {
      if (v < 0 || reads[v] != 1 || plan.values[v].is_output || plan.values[v].view_of >= 0 ||
          plan.values[v].dtype != DType::f32 || plan.values[v].producer < 0)
        return false;
      const Node& producer = g.nodes[static_cast<size_t>(plan.values[v].producer)];
      const TileRule* rule = lookup(producer);
      return producer.outputs.size() == 1 && rule && rule->writes_channel_slice &&
             rule->writes_channel_slice(producer, node_infos(g, producer).in);
    };
    if (ins.empty() || !std::all_of(ins.begin(), ins.end(), can_be_slice)) continue;
    int64_t offset = 0;
    for (int32_t v : ins) {
      PlannedValue& slice = plan.values[v];
      slice.slice_of = out;
      slice.slice_offset = offset;
      g.nodes[static_cast<size_t>(slice.producer)].decisions.y_channel_offset = offset;
      offset += slice.shape[3];
    }
  }
}

}  // namespace grove::plan_detail

#include "runtime/planned_run.h"

#include <algorithm>
#include <array>
#include <cstring>
#include <span>
#include <new>
#include <thread>

#include "graph/node_decisions.h"
#include "ops/evaluate.h"
#include "ops/op.h"
#include "runtime/help_board.h"

namespace grove {
namespace {

void poison(Tensor& t) {
  int fill = 0x7f;  // integers: huge values, so a stray index read fails loudly
  if (t.dtype() == DType::f32 || t.dtype() == DType::f64 || t.dtype() == DType::f16 || t.dtype() == DType::bf16) fill = 0xff;  // NaN
  if (t.dtype() == DType::boolean) fill = 0x01;
  if (t.bytes() > 0) std::memset(t.raw(), fill, t.bytes());
}

[[noreturn]] void rethrow_for(const Graph& g, const Node& node) {
  std::string prefix = g.path.empty() ? "" : g.path + ": ";
  try {
    throw;
  } catch (const Error& e) {
    if (std::string(e.what()).find("node '") != std::string::npos) throw e.prefixed(prefix);
    throw e.prefixed(prefix + node.describe() + ": ");
  } catch (const std::bad_alloc&) {
    throw Error(prefix + node.describe() + ": out of memory");
  } catch (const std::exception& e) {
    throw Error(prefix + node.describe() + ": " + e.what());
  }
}

// A node's operand pointers, on the stack up to kInline of them.
template <class T>
class OperandPointers {
 public:
  static constexpr size_t kInline = 8;
  explicit OperandPointers(size_t n) : n_(n) {
    if (n > kInline) heap_.resize(n);
  }
  OperandPointers(const OperandPointers&) = delete;
  OperandPointers& operator=(const OperandPointers&) = delete;
  T*& operator[](size_t i) { return data()[i]; }
  size_t size() const { return n_; }
  std::span<T* const> span() { return {data(), n_}; }

 private:
  T** data() { return n_ > kInline ? heap_.data() : inline_.data(); }
  std::array<T*, kInline> inline_{};
  std::vector<T*> heap_;
  size_t n_;
};

}  // namespace

PlannedRun::PlannedRun(std::shared_ptr<const Plan> plan, TensorMap inputs, PlannedRunOptions options)
    : plan_(std::move(plan)), options_(options) {
  if (!plan_) throw Error("PlannedRun: no plan");
  if (!options_.scratch) options_.scratch = std::make_shared<WorkerScratch>(kOwnScratchSlots);
  const Plan& p = *plan_;
  check_inputs(p.graph, inputs);
  slots_ = std::make_unique<Slot[]>(p.values.size());
  for (size_t v = 0; v < p.values.size(); ++v) {
    const PlannedValue& pv = p.values[v];
    int32_t users = pv.consumer_tiles;
    if (pv.producer >= 0) users += p.tiles.tile_count[pv.producer];
    slots_[v].users.fetch_add(users, std::memory_order_relaxed);
    if (pv.slice_of >= 0) slots_[pv.slice_of].users.fetch_add(1, std::memory_order_relaxed);  // released with the slice
    if (pv.producer < 0) {
      slots_[v].tensor = inputs.at(pv.name);
      slots_[v].state.store(kAllocated, std::memory_order_relaxed);
    }
  }
  if (p.node_constants.size() != p.graph.nodes.size()) throw Error("PlannedRun: a plan not made by make_plan");
}

PlannedRun::~PlannedRun() = default;

DagView PlannedRun::dag() const {
  const TileGraph& tg = plan_->tiles;
  return {tg.n_parents, tg.child_begin, tg.children, tg.depth, tg.sources, tg.place};
}

namespace {
// A plan's tiles by node: "conv1 #3"; a fused node shows what it does: "conv1 (Conv+Add+Relu) #3".
class PlanTileNames : public TileNames {
 public:
  explicit PlanTileNames(std::shared_ptr<const Plan> plan) : plan_(std::move(plan)) {}
  std::string label(int32_t tile) const override {
    int32_t n = plan_->tiles.node.at(tile);
    if (n < 0) return "barrier";
    const Node& node = plan_->graph.nodes[n];
    std::string label = node.name.empty() ? op_label(node) : node.name;
    if (!node.name.empty() && has_fused_epilogue(node)) label += " (" + op_label(node) + ")";
    return label + " #" + std::to_string(tile - plan_->tiles.first_tile[n]);
  }
  int32_t depth(int32_t tile) const override { return plan_->tiles.depth.at(tile); }

 private:
  std::shared_ptr<const Plan> plan_;
};
}  // namespace

std::shared_ptr<const TileNames> PlannedRun::tile_names() const { return std::make_shared<PlanTileNames>(plan_); }

void PlannedRun::allocate(int32_t v) {
  Slot& slot = slots_[v];
  for (;;) {
    int8_t state = slot.state.load(std::memory_order_acquire);
    if (state == kAllocated) return;
    if (state == kEmpty && slot.state.compare_exchange_weak(state, kAllocating, std::memory_order_acquire)) break;
    if (state == kAllocating) std::this_thread::yield();  // another tile is taking it from the pool
  }
  try {
    fill(v);
  } catch (...) {
    slot.state.store(kEmpty, std::memory_order_release);  // as call_once: the next tile tries again
    throw;
  }
  slot.state.store(kAllocated, std::memory_order_release);
}

// The buffer of value v, taken by the one tile that won its slot.
void PlannedRun::fill(int32_t v) {
  Slot& slot = slots_[v];
  const PlannedValue& pv = plan_->values[v];
  if (pv.view_of >= 0) {  // the base's buffer, relabelled; its bytes are counted once, there
    allocate(pv.view_of);
    slot.tensor = slots_[pv.view_of].tensor.reshaped(pv.shape);
    return;
  }
  if (pv.slice_of >= 0) {  // the Concat's whole buffer: the producer writes its channels there
    allocate(pv.slice_of);
    slot.tensor = slots_[pv.slice_of].tensor;
    return;
  }
  // From the pool a warm run touches no new pages. A reused block holds old bytes: a tiled
  // op's tiles write every element of their output before any reader reads it (the
  // poisoned-buffer tests check this), so only reference-computed outputs need zeros.
  if (options_.buffers) {
    slot.tensor = options_.buffers->take(pv.dtype, pv.shape);
    if (!plan_->rules[pv.producer] && slot.tensor.bytes() > 0) std::memset(slot.tensor.raw(), 0, slot.tensor.bytes());
  } else {
    slot.tensor = Tensor(pv.dtype, pv.shape);
  }
  if (options_.poison_buffers && plan_->rules[pv.producer]) poison(slot.tensor);
  int64_t now = current_bytes_.fetch_add(static_cast<int64_t>(slot.tensor.bytes())) + static_cast<int64_t>(slot.tensor.bytes());
  int64_t peak = peak_bytes_.load(std::memory_order_relaxed);
  while (now > peak && !peak_bytes_.compare_exchange_weak(peak, now)) {
  }
}

void PlannedRun::release_use(int32_t v) {
  Slot& slot = slots_[v];
  if (slot.users.fetch_sub(1, std::memory_order_acq_rel) != 1) return;
  const PlannedValue& pv = plan_->values[v];
  if (pv.is_output) return;
  if (pv.view_of >= 0) {
    slot.tensor = Tensor();
    release_use(pv.view_of);  // the use of the base its view tile kept (run_node_tile)
    return;
  }
  if (pv.slice_of >= 0) {
    slot.tensor = Tensor();
    release_use(pv.slice_of);  // the use the slice holds (the constructor)
    return;
  }
  if (pv.producer >= 0) current_bytes_.fetch_sub(static_cast<int64_t>(slot.tensor.bytes()));
  slot.tensor = Tensor();
}

void PlannedRun::run_tile(int32_t tile, int worker) {
  int32_t n = plan_->tiles.node.at(tile);
  if (n >= 0) {
    try {
      run_node_tile(n, tile, options_.scratch->of(worker));
    } catch (...) {
      rethrow_for(plan_->graph, plan_->graph.nodes[n]);
    }
  }
  tiles_done_.fetch_add(1, std::memory_order_acq_rel);
}

// The plan's TilePieces for the node (plan/plan.h): the tile's range along that dim as
// `units` runs of `size` (the last one shorter), dealt evenly to at most kMaxTilePieces
// pieces.
namespace {

struct PieceRuns {
  int dim = -1;
  int64_t size = 0, units = 0;
  int count = 1;
};

PieceRuns piece_runs(const Plan& p, int32_t tile) {
  const int32_t n = p.tiles.node[static_cast<size_t>(tile)];
  if (n < 0 || static_cast<size_t>(n) >= p.pieces.size()) return {};
  const TilePieces& tp = p.pieces[static_cast<size_t>(n)];
  if (tp.dim < 0 || tp.size <= 0) return {};
  const int64_t units = (p.tiles.region[static_cast<size_t>(tile)][static_cast<size_t>(tp.dim)].size() + tp.size - 1) / tp.size;
  if (units <= 1) return {};
  return {tp.dim, tp.size, units, static_cast<int>(std::min<int64_t>(units, kMaxTilePieces))};
}

}  // namespace

int PlannedRun::pieces(int32_t tile) const { return piece_runs(*plan_, tile).count; }

void PlannedRun::begin_pieces(int32_t tile, int) {
  const int32_t n = plan_->tiles.node.at(tile);
  try {
    if (!take_operands(n)) throw Error("a view or gathered node has no pieces");
  } catch (...) {
    rethrow_for(plan_->graph, plan_->graph.nodes[n]);
  }
}

void PlannedRun::run_pieces(int32_t tile, int first_piece, int end_piece, int, int worker) {
  const int32_t n = plan_->tiles.node.at(tile);
  const PieceRuns runs = piece_runs(*plan_, tile);
  Region region = plan_->tiles.region[static_cast<size_t>(tile)];
  Range& r = region[static_cast<size_t>(runs.dim)];
  const int64_t first = runs.units * first_piece / runs.count, last = runs.units * end_piece / runs.count;
  r.end = std::min(r.end, r.begin + last * runs.size);
  r.begin += first * runs.size;
  try {
    compute(n, region, options_.scratch->of(worker));
  } catch (...) {
    rethrow_for(plan_->graph, plan_->graph.nodes[n]);
  }
}

void PlannedRun::end_pieces(int32_t tile, int) {
  release_operands(plan_->tiles.node.at(tile));
  tiles_done_.fetch_add(1, std::memory_order_acq_rel);
}

void PlannedRun::run_node_tile(int32_t n, int32_t tile, TileScratch& scratch) {
  if (!take_operands(n)) return;
  compute(n, plan_->tiles.region[static_cast<size_t>(tile)], scratch);
  release_operands(n);
}

bool PlannedRun::take_operands(int32_t n) {
  const Plan& p = *plan_;
  const auto& ins = p.node_inputs[n];
  const auto& outs = p.node_outputs[n];
  for (int32_t v : outs)
    if (v >= 0) allocate(v);
  if (is_view_node(p, n)) {  // allocate() made the view; its base stays in use until the view is released
    for (size_t i = 1; i < ins.size(); ++i)
      if (ins[i] >= 0) release_use(ins[i]);
    release_use(outs[0]);
    return false;
  }
  if (is_gathered_node(p, n)) {  // the producers wrote every input into the output already
    for (int32_t v : ins) release_use(v);
    release_use(outs[0]);
    return false;
  }
  for (int32_t v : ins)
    if (v >= 0) allocate(v);  // a tile that reads nothing of a producer may run before it
  return true;
}

void PlannedRun::compute(int32_t n, const Region& region, TileScratch& scratch) {
  const Plan& p = *plan_;
  const Node& node = p.graph.nodes[n];
  const auto& ins = p.node_inputs[n];
  const auto& outs = p.node_outputs[n];
  // The operands' pointers live on the stack for the usual few: a tile allocates nothing
  // of its own on the run path.
  OperandPointers<const Tensor> in(ins.size());
  for (size_t i = 0; i < ins.size(); ++i) in[i] = ins[i] >= 0 ? &slots_[ins[i]].tensor : p.node_constants[n][i];
  OperandPointers<Tensor> out(outs.size());
  for (size_t k = 0; k < outs.size(); ++k)
    if (outs[k] >= 0) out[k] = &slots_[outs[k]].tensor;

  if (const TileRule* rule = p.rules[n]) {
    rule->run_tile(node, in.span(), out.span(), region,
                   n < static_cast<int32_t>(p.prepared.size()) ? p.prepared[n].get() : nullptr, scratch);
  } else {
    const OpSpec* def = OpRegistry::builtin().find(node);
    if (!def || !def->reference) throw Unsupported("unsupported op");
    // Optional outputs the node leaves unnamed still get scratch buffers when infer defines them.
    std::vector<Tensor> scratch(outs.size());
    bool unnamed = false;
    for (size_t k = 0; k < outs.size(); ++k) unnamed = unnamed || outs[k] < 0;
    if (unnamed) {
      std::vector<ValueInfo> infos(in.size());
      for (size_t i = 0; i < in.size(); ++i) {
        if (in[i]) infos[i] = ValueInfo{in[i]->dtype(), in[i]->shape(), in[i], true};
        else infos[i].present = false;
      }
      std::vector<ValueInfo> out_infos = infer_node(node, infos);
      for (size_t k = 0; k < outs.size(); ++k)
        if (outs[k] < 0 && out_infos[k].dtype != DType::undefined) {
          scratch[k] = Tensor(out_infos[k].dtype, out_infos[k].shape);
          out[k] = &scratch[k];
        }
    }
    def->reference(node, in.span(), out.span());
  }

}

void PlannedRun::release_operands(int32_t n) {
  for (int32_t v : plan_->node_inputs[n])
    if (v >= 0) release_use(v);
  for (int32_t v : plan_->node_outputs[n])
    if (v >= 0) release_use(v);
}

std::future<TensorMap> PlannedRun::result() {
  result_wanted_ = true;
  return result_.get_future();
}

void PlannedRun::finished(std::exception_ptr error) noexcept {
  if (!result_wanted_) return;
  try {
    if (error) std::rethrow_exception(error);
    result_.set_value(outputs());
  } catch (...) {
    result_.set_exception(std::current_exception());
  }
}

TensorMap PlannedRun::outputs() const {
  const Plan& p = *plan_;
  if (tiles_done_.load(std::memory_order_acquire) != p.tiles.size())
    throw Error("PlannedRun: outputs asked for before every tile ran (" + std::to_string(tiles_done_.load()) + " of " +
                std::to_string(p.tiles.size()) + ")");
  std::map<std::string, int32_t> index;
  for (size_t v = 0; v < p.values.size(); ++v)
    if (p.values[v].is_output) index[p.values[v].name] = static_cast<int32_t>(v);
  TensorMap result;
  for (const auto& o : p.graph.outputs) {
    auto it = index.find(o.name);
    if (it != index.end()) result[o.name] = slots_[it->second].tensor;
    else result[o.name] = p.graph.initializers.at(o.name);
  }
  return result;
}

}  // namespace grove

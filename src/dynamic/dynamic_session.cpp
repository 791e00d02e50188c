#include "grove/dynamic.h"

#include <algorithm>
#include <charconv>
#include <chrono>
#include <numeric>

#include "dynamic/latency_controller.h"
#include "dynamic/slice_subnet.h"
#include "dynamic/subnet_spec.h"
#include "graph/error.h"
#include "onnx/import.h"
#include "passes/flops.h"
#include "runtime/session.h"

namespace grove {
namespace {

double width_of(const SubnetSpec& spec, const std::vector<LayerWidth>& layers) {
  if (spec.channels.empty()) return spec.ratio;
  int64_t full = 0, kept = 0;
  for (const auto& l : layers) {
    full += l.full;
    kept += l.kept;
  }
  return full ? static_cast<double>(kept) / static_cast<double>(full) : 1.0;
}

DynamicSpec spec_of(const Graph& g, const std::vector<double>& ratios) {
  if (!ratios.empty()) return uniform_dynamic_spec(ratios);
  auto it = g.metadata.find(kSubnetsMetadataKey);
  if (it == g.metadata.end())
    throw Error(g.path + ": not a dynamic model (no metadata_props key '" + kSubnetsMetadataKey +
                "'); give width ratios to slice it uniformly");
  try {
    return parse_dynamic_spec(it->second);
  } catch (const Error& e) {
    throw e.prefixed(g.path + ": ");
  }
}

}  // namespace

struct DynamicSession::Impl {
  Engine& engine;
  std::vector<SubnetInfo> infos;
  std::vector<Session> sessions;  // same order as infos
  std::unique_ptr<LatencyController> controller;
  std::chrono::steady_clock::time_point born = std::chrono::steady_clock::now();
  double now_s() const { return std::chrono::duration<double>(std::chrono::steady_clock::now() - born).count(); }
  // Runs sub-net `subnet` and tells the controller how long it took under `others` (not when
  // it is cancelled: it throws then).
  TensorMap run_timed(const TensorMap& inputs, int subnet, int64_t others, RunStats* stats, const CancelToken& cancel);
};

DynamicSession::DynamicSession(Engine& engine, const std::string& path, SessionOptions options, std::vector<double> ratios)
    : impl_(std::make_unique<Impl>(Impl{engine, {}, {}, nullptr, std::chrono::steady_clock::now()})) {
  const Graph full = load_onnx(path);
  const DynamicSpec spec = spec_of(full, ratios);
  struct Built {
    SubnetInfo info;
    Session session;
  };
  std::vector<Built> built;
  for (const auto& s : spec.subnets) {
    SlicedSubnet sliced = [&] {
      try {
        return slice_subnet(full, spec, s);
      } catch (const Error& e) {
        throw e.prefixed(path + ": ");
      }
    }();
    sliced.graph.path = path + " [sub-net " + s.name + "]";
    SubnetInfo info{s.name, width_of(s, sliced.layers), s.accuracy, 0, sliced.graph.parameter_count()};
    // Symbolic sizes (a batch dimension) taken as 1 for the FLOPs: the sub-nets compare alike.
    ShapeMap at_one;
    for (const ValueDecl& in : sliced.graph.inputs) {
      if (sliced.graph.initializers.count(in.name)) continue;
      Shape shape;
      for (const Dim& d : in.dims) shape.push_back(d.value >= 0 ? d.value : 1);
      at_one[in.name] = shape;
    }
    Session session(engine, model_from_graph(std::move(sliced.graph)), options);
    if (session.model().is_bound()) {
      info.flops = graph_flops(bound_graph(session.model()));
      plan_for(session, bound_graph(session.model()).bound_inputs);  // planned now, not on the first run
    } else if (auto plan = plan_for(session, at_one)) {
      info.flops = plan->total_flops;
    }
    built.push_back(Built{std::move(info), std::move(session)});
  }
  std::stable_sort(built.begin(), built.end(), [&](const Built& a, const Built& b) {
    if (a.info.flops != b.info.flops) return a.info.flops < b.info.flops;
    return a.info.ratio < b.info.ratio;
  });
  std::vector<int64_t> flops;
  for (auto& b : built) {
    flops.push_back(b.info.flops);
    impl_->infos.push_back(std::move(b.info));
    impl_->sessions.push_back(std::move(b.session));
  }
  impl_->controller = std::make_unique<LatencyController>(flops);
}

DynamicSession::DynamicSession(DynamicSession&&) noexcept = default;
DynamicSession& DynamicSession::operator=(DynamicSession&&) noexcept = default;
DynamicSession::~DynamicSession() = default;

const std::vector<SubnetInfo>& DynamicSession::subnets() const { return impl_->infos; }

int DynamicSession::find(const std::string& name) const {
  const auto& infos = impl_->infos;
  for (size_t i = 0; i < infos.size(); ++i)
    if (infos[i].name == name) return static_cast<int>(i);
  double ratio = 0;
  auto [p, ec] = std::from_chars(name.data(), name.data() + name.size(), ratio);
  if (ec != std::errc() || p != name.data() + name.size()) return -1;
  for (size_t i = 0; i < infos.size(); ++i)
    if (std::abs(infos[i].ratio - ratio) < 1e-9) return static_cast<int>(i);
  return -1;
}

Session& DynamicSession::session(int subnet) {
  if (subnet < 0 || subnet >= static_cast<int>(impl_->sessions.size()))
    throw Error("sub-net index " + std::to_string(subnet) + " is out of range (the model has " +
                std::to_string(impl_->sessions.size()) + ")");
  return impl_->sessions[static_cast<size_t>(subnet)];
}

TensorMap DynamicSession::run(const TensorMap& inputs, int subnet, RunStats* stats, const CancelToken& cancel) {
  session(subnet);  // checks the index
  const int64_t others = impl_->controller->load(impl_->engine.stats().jobs_in_flight, impl_->now_s());
  return impl_->run_timed(inputs, subnet, others, stats, cancel);
}

TensorMap DynamicSession::Impl::run_timed(const TensorMap& inputs, int subnet, int64_t others, RunStats* stats,
                                          const CancelToken& cancel) {
  const auto start = std::chrono::steady_clock::now();
  TensorMap out = sessions[static_cast<size_t>(subnet)].run(inputs, stats, cancel);
  const double ms = std::chrono::duration<double, std::milli>(std::chrono::steady_clock::now() - start).count();
  controller->observe(subnet, others, ms, now_s());
  return out;
}

SubnetChoice DynamicSession::choose(double target_ms) const {
  SubnetChoice c;
  const double now = impl_->now_s();
  c.others_in_flight = impl_->controller->load(impl_->engine.stats().jobs_in_flight, now);
  c.subnet = impl_->controller->choose(target_ms, c.others_in_flight, now, &c.predicted_ms);
  return c;
}

TensorMap DynamicSession::run_within(const TensorMap& inputs, double target_ms, SubnetChoice* choice,
                                     const CancelToken& cancel) {
  if (!(target_ms > 0)) throw Error("latency target must be positive, not " + std::to_string(target_ms) + " ms");
  const SubnetChoice c = choose(target_ms);
  if (choice) *choice = c;
  return impl_->run_timed(inputs, c.subnet, c.others_in_flight, nullptr, cancel);
}

}  // namespace grove

// grove tail: each Conv / MatMul / Gemm layer's latency staircase over its output-channel count
// on this machine (TA-DNN, thesis 004 4.2). Latency does not fall smoothly with channels: it
// steps with the microkernel's register tile, the vector width and the tile grid. A layer
// just past a step loses more latency than channels when pruned to the step; a layer well
// below the next step can grow to it for free. Each layer is timed alone, as a one-node model
// with random weights of the candidate width, on an engine of the given threads. --apply writes
// the model with the suggested widths (cli/tail_apply.h).
#include <algorithm>
#include <chrono>
#include <optional>
#include <cstdio>
#include <random>

#include "cli/bench_stats.h"
#include "cli/commands.h"
#include "cli/options.h"
#include "cli/format.h"
#include "cli/inputs.h"
#include "cli/tail_apply.h"
#include "graph/node_decisions.h"
#include "ops/op_names.h"
#include "runtime/session.h"
#include "runtime/trace.h"

namespace grove::cli {
namespace {

using Clock = std::chrono::steady_clock;

// Where a layer's output channels live: the weight input and its dim, the bias input.
struct Layer {
  size_t weight_input = 1;
  size_t weight_dim = 0;
  int bias_input = -1;
  int channel_dim = 1;  // of the output (and a fused residual); -1: the last
  int64_t channels = 0;
};

bool constant(const Graph& g, const std::string& name) { return !name.empty() && g.initializers.count(name) > 0; }

// Conv (2-D, one group, constant weights), MatMul and Gemm with a constant 2-D B; nullopt
// for anything else.
std::optional<Layer> layer_of(const Graph& g, const Node& node) {
  if (!node.domain.empty()) return std::nullopt;
  Layer l;
  if (node.op_type == kConv) {
    if (node.inputs.size() < 2 || !constant(g, node.inputs[1]) || node.attr_int("group", 1) != 1) return std::nullopt;
    const Shape& w = g.initializers.at(node.inputs[1]).shape();
    if (w.size() != 4) return std::nullopt;
    l.weight_dim = 0;
    l.bias_input = node.inputs.size() > 2 && constant(g, node.inputs[2]) ? 2 : -1;
    l.channels = w[0];
  } else if (node.op_type == kMatMul || node.op_type == kGemm) {
    if (node.inputs.size() < 2 || !constant(g, node.inputs[1])) return std::nullopt;
    const Shape& b = g.initializers.at(node.inputs[1]).shape();
    if (b.size() != 2) return std::nullopt;
    l.weight_dim = node.op_type == kGemm && node.attr_int("transB", 0) ? 0 : 1;
    l.channel_dim = -1;
    // A bias per output column (Gemm's C, or a MatMul's fused one), or none: anything else
    // (a C to broadcast) is not a layer this tool can resize.
    const bool biased = node.inputs.size() > kEpilogueBiasInput && !node.inputs[kEpilogueBiasInput].empty();
    if (biased && !(constant(g, node.inputs[kEpilogueBiasInput]) &&
                    g.initializers.at(node.inputs[kEpilogueBiasInput]).shape() == Shape{b[l.weight_dim]}))
      return std::nullopt;
    l.bias_input = biased ? static_cast<int>(kEpilogueBiasInput) : -1;
    l.channels = b[l.weight_dim];
  } else {
    return std::nullopt;
  }
  return l;
}

// The layer alone with `channels` output channels: its other inputs are graph inputs of the
// shapes they have in the model (a fused residual takes the new width), weights random.
Graph layer_alone(const Graph& g, const Node& node, const Layer& l, int64_t channels, std::mt19937_64& rng) {
  Graph one;
  one.name = "tail";
  one.opsets = g.opsets;
  Node n = node;
  n.outputs = {"y"};
  for (size_t i = 0; i < n.inputs.size(); ++i) {
    if (n.inputs[i].empty()) continue;
    const std::string name = "in" + std::to_string(i);
    const bool weight = i == l.weight_input, bias = static_cast<int>(i) == l.bias_input;
    if (weight || bias) {
      Shape shape = g.initializers.at(n.inputs[i]).shape();
      shape[weight ? l.weight_dim : 0] = channels;
      one.initializers[name] = random_tensor(DType::f32, shape, rng);
    } else if (constant(g, n.inputs[i]) && i != kEpilogueResidualInput) {
      one.initializers[name] = g.initializers.at(n.inputs[i]);
    } else {
      const bool known = constant(g, n.inputs[i]);
      const Shape base = known ? g.initializers.at(n.inputs[i]).shape() : g.values.at(n.inputs[i]).shape;
      const DType dtype = known ? g.initializers.at(n.inputs[i]).dtype() : g.values.at(n.inputs[i]).dtype;
      Shape shape = base;
      // A fused residual is shaped like the output, whose channels change with the layer.
      if (i == kEpilogueResidualInput && !shape.empty()) {
        const size_t d = l.channel_dim < 0 ? shape.size() - 1 : static_cast<size_t>(l.channel_dim);
        if (d < shape.size()) shape[d] = channels;
      }
      if (known) {
        one.initializers[name] = random_tensor(dtype, shape, rng);
        n.inputs[i] = name;
        continue;
      }
      ValueDecl decl{name, dtype, {}, true};
      for (int64_t d : shape) decl.dims.push_back(Dim{d, ""});
      one.inputs.push_back(decl);
    }
    n.inputs[i] = name;
  }
  one.nodes.push_back(n);
  one.outputs.push_back(ValueDecl{"y", DType::f32, {}, false});
  return one;
}

// Median ms of `runs` runs of the layer alone, after warm-up.
double time_layer(Engine& engine, const Graph& one, const Limits& limits, int runs, std::mt19937_64& rng) {
  Session session(engine, model_from_graph(one, {}, limits));
  TensorMap inputs;
  for (const ValueDecl& d : one.inputs) {
    Shape shape;
    for (const Dim& dim : d.dims) shape.push_back(dim.value);
    inputs[d.name] = random_tensor(d.dtype, shape, rng);
  }
  // A sample is as many back-to-back runs as fill about 2 ms: a 0.1 ms layer timed run by run
  // is at the mercy of every timer tick and wake-up.
  auto t = Clock::now();
  for (int w = 0; w < 2; ++w) session.run(inputs);
  const double warm_ms = std::chrono::duration<double, std::milli>(Clock::now() - t).count() / 2;
  const int repeat = std::clamp(static_cast<int>(2.0 / std::max(warm_ms, 1e-3)), 1, 1000);
  std::vector<double> ms;
  for (int r = 0; r < runs; ++r) {
    t = Clock::now();
    for (int k = 0; k < repeat; ++k) session.run(inputs);
    ms.push_back(std::chrono::duration<double, std::milli>(Clock::now() - t).count() / repeat);
  }
  return percentile(ms, 50);
}

struct Staircase {
  std::string name, op;
  int64_t channels = 0;
  std::vector<std::pair<int64_t, double>> points;  // (channels, ms), ascending
  double ms = 0;                                    // at the model's own width
  int64_t prune_to = 0, grow_to = 0;                // 0: no suggestion
  double prune_ms = 0, grow_ms = 0;
};

// Prune: the narrower width whose latency saving most exceeds its share of channels removed,
// when by at least `threshold`. Grow: the widest width that costs at most `threshold` / 4 more.
void suggest(Staircase& s, double threshold) {
  double best = threshold;
  for (const auto& [c, ms] : s.points) {
    if (c < s.channels) {
      const double gain = (s.ms - ms) / s.ms - double(s.channels - c) / double(s.channels);
      if (gain > best) best = gain, s.prune_to = c, s.prune_ms = ms;
    }
    if (c > s.channels && ms <= s.ms * (1 + threshold / 4)) s.grow_to = c, s.grow_ms = ms;
  }
}

// The suggestions --apply-mode takes: a prune where one is suggested (for prune and both),
// else the free growth (for grow and both).
std::vector<WidthSuggestion> chosen_widths(const std::vector<Staircase>& layers, const std::string& mode) {
  std::vector<WidthSuggestion> out;
  for (const Staircase& s : layers) {
    if (s.prune_to && mode != "grow")
      out.push_back({s.name, s.channels, s.prune_to,
                     strf("prune: %.3f -> %.3f ms alone (-%.0f%% for %.0f%% fewer channels)", s.ms, s.prune_ms,
                          100 * (s.ms - s.prune_ms) / s.ms, 100.0 * double(s.channels - s.prune_to) / double(s.channels))});
    else if (s.grow_to && mode != "prune")
      out.push_back({s.name, s.channels, s.grow_to, strf("grow: free, %.3f -> %.3f ms alone", s.ms, s.grow_ms)});
  }
  return out;
}

// --widths: the widths asked, without timing; --apply-mode, when given, keeps only its kind.
int apply_given_widths(const TailOptions& o, const Model& model) {
  const Graph& imported = imported_graph(model);
  if (channel_layers(imported).empty())
    throw Error(o.model + ": no Conv (one group), MatMul or Gemm with constant weights to resize");
  std::vector<WidthSuggestion> asked;
  for (WidthSuggestion& w : parse_widths(o.widths, imported)) {
    const bool grows = w.to > w.channels;
    if ((o.apply_mode == "grow" && !grows) || (o.apply_mode == "prune" && grows)) {
      std::fprintf(o.json ? stderr : stdout, "--widths %s=%lld left out: --apply-mode %s\n", w.layer.c_str(),
                   (long long)w.to, o.apply_mode.c_str());
      continue;
    }
    asked.push_back(std::move(w));
  }
  const AppliedWidths a = apply_widths(o, imported, asked, o.json ? stderr : stdout);
  if (o.json) std::printf("{\"model\": %s, \"apply\": %s}\n", json_quote(o.model).c_str(), applied_json(o, a).c_str());
  return 0;
}

// Long node names keep their end, where the layer's own name is.
std::string short_name(const std::string& name) { return name.size() <= 40 ? name : "..." + name.substr(name.size() - 37); }

}  // namespace

int run_tail(const TailOptions& o) {
  if (o.apply.empty() && (!o.widths.empty() || !o.apply_mode.empty()))
    throw Error(std::string(o.widths.empty() ? "--apply-mode chooses" : "--widths sets") +
                " what --apply writes: add --apply OUT.onnx");
  if (!o.apply.empty()) check_writable(o.apply);
  Model model = Model::load(o.model, parse_shape_options(o.shapes), o.limits);
  if (!o.widths.empty()) return apply_given_widths(o, model);
  if (!model.is_bound())
    throw Error(o.model + ": the input shapes are not known; pass --shape NAME=DIMS");
  const Graph& g = bound_graph(model);
  Engine engine({.threads = o.threads});
  std::mt19937_64 rng(o.seed);
  std::vector<Staircase> layers;
  size_t candidates = 0;
  for (const Node& node : g.nodes)
    if (layer_of(g, node) && (o.only.empty() || node.name == o.only)) ++candidates;
  if (candidates == 0) throw Error(o.model + ": no Conv (one group), MatMul or Gemm with constant weights" +
                                   (o.only.empty() ? std::string() : " named '" + o.only + "'"));
  std::fprintf(stderr, "timing %zu layers alone on %d threads, %lld widths each...\n", candidates, engine.threads(),
               (long long)(2 * o.span / o.step + 1));
  const auto start = Clock::now();
  for (const Node& node : g.nodes) {
    const std::optional<Layer> l = layer_of(g, node);
    if (!l || (!o.only.empty() && node.name != o.only)) continue;
    Staircase s{node.name, node.op_type, l->channels, {}, 0, 0, 0, 0, 0};
    for (int64_t c = std::max<int64_t>(o.step, l->channels - o.span); c <= l->channels + o.span; c += o.step)
      s.points.emplace_back(c, 0.0);
    if (std::none_of(s.points.begin(), s.points.end(), [&](const auto& p) { return p.first == l->channels; })) {
      s.points.emplace_back(l->channels, 0.0);
      std::sort(s.points.begin(), s.points.end());
    }
    // Two sweeps, up then down, each point's better median: a noisy moment hits one of them.
    for (int sweep = 0; sweep < 2; ++sweep)
      for (size_t k = 0; k < s.points.size(); ++k) {
        auto& [c, ms] = s.points[sweep == 0 ? k : s.points.size() - 1 - k];
        const double t = time_layer(engine, layer_alone(g, node, *l, c, rng), o.limits, o.runs, rng);
        ms = sweep == 0 ? t : std::min(ms, t);
      }
    for (const auto& [c, ms] : s.points)
      if (c == s.channels) s.ms = ms;
    suggest(s, o.threshold);
    // A suggestion rests on two widths: time them again, alternating, and keep each width's
    // best; it stands only if it still holds.
    if (s.prune_to || s.grow_to) {
      for (int round = 0; round < 3; ++round)
        for (auto& [c, ms] : s.points)
          if (c == s.channels || c == s.prune_to || c == s.grow_to)
            ms = std::min(ms, time_layer(engine, layer_alone(g, node, *l, c, rng), o.limits, o.runs, rng));
      for (const auto& [c, ms] : s.points)
        if (c == s.channels) s.ms = ms;
      s.prune_to = s.grow_to = 0;
      suggest(s, o.threshold);
    }
    layers.push_back(s);
    std::fprintf(stderr, "  %-40s %5lld channels %8.3f ms   (%.0f s)\n", s.name.c_str(), (long long)s.channels, s.ms,
                 std::chrono::duration<double>(Clock::now() - start).count());
  }

  // What --apply writes, after the table (its lines follow it) or before the JSON (its lines go
  // to stderr, the outcome into the JSON).
  auto apply = [&](std::FILE* out) {
    return apply_widths(o, imported_graph(model), chosen_widths(layers, o.apply_mode.empty() ? "grow" : o.apply_mode),
                        out);
  };
  double total = 0, saved = 0;
  for (const Staircase& s : layers) {
    total += s.ms;
    if (s.prune_to) saved += s.ms - s.prune_ms;
  }
  if (o.json) {
    std::printf("{\"model\": %s, \"threads\": %d, \"layers\": [", json_quote(o.model).c_str(), engine.threads());
    for (size_t i = 0; i < layers.size(); ++i) {
      const Staircase& s = layers[i];
      std::printf("%s{\"name\": %s, \"op\": \"%s\", \"channels\": %lld, \"ms\": %.4f, \"prune_to\": %lld, "
                  "\"prune_ms\": %.4f, \"grow_to\": %lld, \"grow_ms\": %.4f, \"points\": [",
                  i ? ", " : "", json_quote(s.name).c_str(), s.op.c_str(), (long long)s.channels, s.ms,
                  (long long)s.prune_to, s.prune_ms, (long long)s.grow_to, s.grow_ms);
      for (size_t k = 0; k < s.points.size(); ++k)
        std::printf("%s[%lld, %.4f]", k ? ", " : "", (long long)s.points[k].first, s.points[k].second);
      std::printf("]}");
    }
    std::printf("], \"layers_ms\": %.4f, \"prune_saves_ms\": %.4f", total, saved);
    if (!o.apply.empty()) std::printf(", \"apply\": %s", applied_json(o, apply(stderr)).c_str());
    std::printf("}\n");
    return 0;
  }
  std::printf("model: %s, %d threads, widths %lld below to %lld above each layer's in steps of %lld\n", o.model.c_str(),
              engine.threads(), (long long)o.span, (long long)o.span, (long long)o.step);
  std::printf("%-40s %-6s %8s %9s   %-26s %-26s\n", "layer", "op", "channels", "ms", "prune to (ms, saved)",
              "grow to (ms, free)");
  for (const Staircase& s : layers) {
    const std::string prune = s.prune_to ? strf("%lld (%.3f, -%.0f%%)", (long long)s.prune_to, s.prune_ms,
                                                100 * (s.ms - s.prune_ms) / s.ms)
                                         : "-";
    const std::string grow =
        s.grow_to ? strf("%lld (%.3f, +%lld ch)", (long long)s.grow_to, s.grow_ms, (long long)(s.grow_to - s.channels)) : "-";
    std::printf("%-40s %-6s %8lld %9.3f   %-26s %-26s\n", short_name(s.name).c_str(), s.op.c_str(),
                (long long)s.channels, s.ms, prune.c_str(), grow.c_str());
  }
  std::printf("layers alone: %.3f ms; the prune suggestions save %.3f ms of it (%.1f%%), predicted\n", total, saved,
              total > 0 ? 100 * saved / total : 0.0);
  if (!o.apply.empty()) apply(stdout);
  return 0;
}

CLI::App* add_tail_command(CLI::App& app, TailOptions& o) {
  CLI::App* cmd = app.add_subcommand(
      "tail", "Each Conv/MatMul layer's latency over its output-channel count: prune/grow hints, and --apply to write them");
  cmd->footer(R"(
Latency does not fall smoothly with a layer's output channels: it steps with the GEMM's
register tile, the vector width and the tile grid (TA-DNN's staircase). Each Conv (one group),
MatMul and Gemm with constant weights is timed alone, as a one-node model with random weights,
at widths from --span below to --span above its own in steps of --step, on --threads threads
(two sweeps, the better median of --runs runs per width). A layer just past a step is listed
with the width to prune to (latency saved beyond the share of channels removed, at least
--threshold); a layer below a step with the widest width that costs at most a quarter of
--threshold more (free channels). docs/scaling.md has measured staircases.

--apply OUT.onnx writes the model with the suggestions applied: --apply-mode grow (the
default) takes the free widths, prune the prunes, both a prune where one is suggested and the
growth elsewhere. --widths NAME=CHANNELS,... names the widths instead, without timing (either
kind, unless --apply-mode is given). A pruned layer keeps the channels whose weights have the
largest L1 norm; a grown one gets new channels with small random weights (--seed) whose weights
in the layers reading them are zero, so a grown model computes what the original did until it
is retrained (tools/tail/retrain.py). The readers follow: a bias, a BatchNormalization, the
next Conv's input channels, a Gemm or MatMul after pooling and Flatten. A layer whose channels
reach what cannot follow them (a residual Add, a grouped conv, a graph output) is kept as it
is, with the reason printed.

Examples:
  grove tail resnet50.onnx --threads 2
  grove tail model.onnx --only /layer4/layer4.0/conv2/Conv --span 64 --step 2 --json
  grove tail model.onnx --threads 2 --apply wider.onnx
  grove tail model.onnx --apply narrow.onnx --widths /conv1/Conv=24,/conv2/Conv=40)");
  cmd->add_option("model", o.model, "The .onnx file")->required();
  add_shape_option(cmd, o.shapes);
  add_threads_option(cmd, o.threads);
  cmd->add_option("--span", o.span, "Widths this many channels below and above each layer's")
      ->capture_default_str()->check(CLI::Range(1, 4096));
  cmd->add_option("--step", o.step, "In steps of this many channels")->capture_default_str()->check(CLI::Range(1, 4096));
  cmd->add_option("--runs,-r", o.runs, "Timed runs per width and sweep")->capture_default_str()->check(CLI::Range(1, 1000));
  cmd->add_option("--threshold", o.threshold, "Smallest latency saving beyond the channel share to suggest a prune")
      ->capture_default_str()->check(CLI::Range(0.0, 1.0));
  cmd->add_option("--only", o.only, "Only the layer with this node name");
  cmd->add_flag("--json", o.json, "Print one JSON object (every width's latency) instead of the table");
  cmd->add_option("--apply", o.apply, "Write the model with the suggested widths to this .onnx file");
  cmd->add_option("--apply-mode", o.apply_mode, "Which suggestions --apply takes: grow (the default), prune or both")
      ->check(CLI::IsMember({"grow", "prune", "both"}));
  cmd->add_option("--widths", o.widths, "NAME=CHANNELS,...: the widths --apply writes, instead of timing")->delimiter(',');
  add_seed_option(cmd, o.seed, "Seed for the random weights and inputs, and for grown channels' weights");
  add_limit_options(cmd, o.limits);
  return cmd;
}

}  // namespace grove::cli

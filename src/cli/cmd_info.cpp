// grove info: what a model takes and gives, what it is made of, and what it costs.
#include <algorithm>
#include <cstdio>
#include <map>

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/format.h"
#include "graph/node_decisions.h"
#include "passes/flops.h"
#include "runtime/model.h"

namespace grove::cli {
namespace {

void print_values(const char* title, const std::vector<ValueDecl>& decls, const Graph* bound) {
  std::printf("%s:\n", title);
  for (const auto& d : decls) {
    std::string line = strf("  %-24s %-8s %s", d.name.c_str(), std::string(dtype_name(d.dtype)).c_str(),
                            declared_dims(d).c_str());
    if (bound) {
      auto it = bound->values.find(d.name);
      if (it != bound->values.end() && bracket_shape(it->second.shape) != declared_dims(d))
        line += "  bound: " + bracket_shape(it->second.shape);
    }
    std::printf("%s\n", line.c_str());
  }
}

struct OpStats {
  int64_t count = 0;
  int64_t flops = 0;
};

void print_histogram(const Graph& g, bool with_flops) {
  std::map<std::string, OpStats> ops;
  int64_t total = 0;
  for (const auto& n : g.nodes) {
    auto& s = ops[n.domain.empty() ? op_label(n) : n.domain + "::" + n.op_type];
    ++s.count;
    if (with_flops) {
      s.flops += node_flops(g, n);
      total += node_flops(g, n);
    }
  }
  std::vector<std::pair<std::string, OpStats>> sorted(ops.begin(), ops.end());
  std::stable_sort(sorted.begin(), sorted.end(), [](const auto& a, const auto& b) { return a.second.count > b.second.count; });
  for (const auto& [op, s] : sorted) {
    std::string line = strf("  %-24s %5lld", op.c_str(), static_cast<long long>(s.count));
    if (with_flops && total > 0)
      line += strf("   %10.4f GFLOPs  %5.1f%%", static_cast<double>(s.flops) * 1e-9,
                   100.0 * static_cast<double>(s.flops) / static_cast<double>(total));
    std::printf("%s\n", line.c_str());
  }
}

}  // namespace

int run_info(const InfoOptions& o) {
  ShapeMap shapes = parse_shape_options(o.shapes);
  Model model = Model::load(o.model, shapes, o.limits);
  const Graph& imported = imported_graph(model);
  const Graph* bound = model.is_bound() ? &bound_graph(model) : nullptr;

  std::printf("model: %s\n", o.model.c_str());
  if (!imported.name.empty()) std::printf("graph: %s\n", imported.name.c_str());
  std::string opsets;
  for (const auto& [domain, version] : imported.opsets)
    opsets += (opsets.empty() ? "" : ", ") + (domain.empty() ? "ai.onnx" : domain) + " " + std::to_string(version);
  std::printf("opsets: %s\n", opsets.c_str());
  print_values("inputs", imported.inputs, bound);
  print_values("outputs", imported.outputs, bound);
  int64_t params = imported.parameter_count();
  std::printf("parameters: %s (%.2f MB as float32)\n", with_commas(params).c_str(), static_cast<double>(params) * 4e-6);

  if (bound) {
    std::string binding;
    for (const auto& [name, shape] : bound->bound_inputs)
      binding += (binding.empty() ? "" : " ") + name + "=" + shape_str(shape);
    std::printf("compute: %.4f GFLOPs for %s\n", static_cast<double>(graph_flops(*bound)) * 1e-9, binding.c_str());
    std::printf("declared tensors: %.1f MB of weights and activations (limit %.1f MB, --max-memory)\n",
                static_cast<double>(bound->declared_bytes) * 1e-6, static_cast<double>(o.limits.memory_limit()) * 1e-6);
    std::printf("ops after binding and optimisation (%zu nodes; imported: %zu):\n", bound->nodes.size(),
                imported.nodes.size());
    print_histogram(*bound, true);
  } else {
    std::string need;
    for (const auto& in : imported.inputs) {
      bool dynamic = !in.has_shape;
      for (const auto& d : in.dims) dynamic = dynamic || d.value < 0;
      if (dynamic) need += " --shape " + in.name + "=...";
    }
    if (!model.unbound_reason().empty())
      std::printf("compute: unknown, shapes depend on input values: %s\n", model.unbound_reason().c_str());
    else
      std::printf("compute: unknown until the input shapes are bound; pass%s\n", need.c_str());
    std::printf("ops as imported (%zu nodes):\n", imported.nodes.size());
    print_histogram(imported, false);
  }
  return 0;
}

constexpr const char* kInfoCommandFooter = R"(
Shows each input and output with its dtype and declared shape (symbolic dims by name), the
parameter count, and a histogram of op types. When every input shape is known (declared
statically or given with --shape), the graph is bound and optimised first: the histogram
is of that graph, with the GFLOPs of each op type (2 x multiply-adds for Conv, ConvTranspose,
MatMul and Gemm; about one per output element for other arithmetic; none for reshapes
and data movement).

Examples:
  grove info resnet50.onnx
  grove info bert.onnx --shape input_ids=1x128 --shape attention_mask=1x128
)";


CLI::App* add_info_command(CLI::App& app, InfoOptions& o) {
  CLI::App* cmd = app.add_subcommand("info", "Describe a model: inputs, outputs, ops, parameters, GFLOPs");
  cmd->footer(kInfoCommandFooter);
  cmd->add_option("model", o.model, "The .onnx file")->required();
  add_shape_option(cmd, o.shapes);

  add_limit_options(cmd, o.limits);
  return cmd;
}

}  // namespace grove::cli

// grove check: prints check_session's report (grove/check.h): each output's largest error
// against the reference executor on the graph as imported and, on a mismatch, the first
// value that differs with the node that makes it and the plan's node that computes it.
#include <cstdio>
#include <random>

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/format.h"
#include "cli/inputs.h"
#include "grove/check.h"
#include "onnx/import.h"
#include "runtime/session.h"

namespace grove::cli {

int run_check(const CheckOptions& o) {
  Graph imported = load_onnx(o.model, o.limits);
  ShapeMap shapes = parse_shape_options(o.shapes);
  TensorMap inputs = load_input_files(imported, o.inputs, shapes);
  const ShapeMap resolved = resolve_input_shapes(imported, shapes);
  std::mt19937_64 rng(o.seed);
  for (const ValueDecl& decl : imported.inputs)
    if (!inputs.count(decl.name)) inputs[decl.name] = random_tensor(decl.dtype, resolved.at(decl.name), rng);

  Engine engine({.threads = o.threads});
  Session session(engine, model_from_graph(std::move(imported), resolved, o.limits),
                  {.schedule = o.schedule == "barrier" ? Schedule::barrier : Schedule::aspen,
                   .precision = parse_precision(o.precision),
                   .conv_layout = parse_layout(o.layout),
                   .tuning = o.tuning});
  std::printf("model: %s\n", o.model.c_str());
  std::printf("compares: the tile runtime (%s, %d threads, %s) with the reference executor on the graph as imported\n",
              o.precision.c_str(), engine.threads(), o.layout == "nchw" ? "convs as written" : "convs channels-last where planned");
  const CheckReport r = check_session(session, inputs, o.tolerance);
  for (const OutputCheck& out : r.outputs) {
    if (out.shape_differs)
      std::printf("  %s: shape differs from the reference's  MISMATCH\n", out.name.c_str());
    else
      std::printf("  %s: largest error %.3g of its largest value %.3g%s\n", out.name.c_str(), out.error, out.largest,
                  out.agrees ? "" : "  MISMATCH");
  }
  if (r.agrees) {
    std::printf("agree: every output within %.3g of the reference\n", o.tolerance);
    return 0;
  }
  std::printf("searched %d values for the first that differs (%d probes; each plans and runs the model)\n",
              r.values_searched, r.probes);
  if (r.value.empty()) {
    std::printf("no single value differs when exposed as an output: the error needs a fused form that exposing a\n"
                "value undoes; run with --layout nchw or --tuning off to narrow it\n");
  } else {
    std::string shapes_text;
    for (const std::string& s : r.input_shapes) shapes_text += (shapes_text.empty() ? "" : ", ") + s;
    std::printf("first differing value: '%s', largest error %.3g of its largest value %.3g\n", r.value.c_str(),
                r.value_error, r.value_largest);
    std::printf("  made by node '%s' (%s)%s with inputs %s\n", r.node.c_str(), r.op.c_str(),
                r.domain.empty() ? "" : (" in domain " + r.domain).c_str(), shapes_text.c_str());
    if (!r.planned_by.empty()) std::printf("  computed in the plan by %s\n", r.planned_by.c_str());
    else std::printf("  the plan has no node of that output: a pass folded it into a node that computes a later value\n");
  }
  std::printf("mismatch: grove's tile runtime and its reference disagree beyond %.3g (attach this output to a bug report)\n",
              o.tolerance);
  return 3;
}

constexpr const char* kCheckCommandFooter = R"(
grove check runs the model twice on the same inputs: the optimized plan on the tile runtime
(the passes, fusions, layouts, precision and tuning grove would use), and the reference
executor on the graph exactly as imported. It prints each output's largest error as a
fraction of that output's largest value. When one is over --tolerance it searches for the
first value, in the model's node order, whose tile-runtime result differs (each probe plans
and runs the model again with that value exposed as an output) and names the node that makes
it, its input shapes, and the node of the plan that computes it (a grove.internal node was
made by a fusion or layout pass).

Exit status: 0 the outputs agree, 3 a mismatch (the report names the node), 1 an error.

Examples:
  grove check model.onnx
  grove check model.onnx --input image=cat.npy --threads 2
  grove check model.onnx --layout nchw --tuning off     narrow a mismatch to a pass
)";


CLI::App* add_check_command(CLI::App& app, CheckOptions& o) {
  CLI::App* cmd = app.add_subcommand(
      "check", "Run the optimized plan and the reference executor on the same inputs; name the first differing node");
  cmd->footer(kCheckCommandFooter);
  cmd->add_option("model", o.model, "The .onnx file")->required();
  add_input_option(cmd, o.inputs,
                   "Input from a .npy file: NAME=FILE.npy (or FILE.npy for a one-input model); the rest get seeded "
                    "random data");
  add_shape_option(cmd, o.shapes);
  add_threads_option(cmd, o.threads);
  add_schedule_option(cmd, o.schedule, "aspen or barrier");
  add_precision_option(cmd, o.precision, {"fp32", "bf16", "int8w"});
  add_tuning_option(cmd, o.tuning);
  add_layout_option(cmd, o.layout);
  cmd->add_option("--tolerance", o.tolerance,
                    "Largest error allowed, as a fraction of each output's largest magnitude (bf16: try 2e-2)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  add_seed_option(cmd, o.seed);
  add_limit_options(cmd, o.limits);
  return cmd;
}

}  // namespace grove::cli

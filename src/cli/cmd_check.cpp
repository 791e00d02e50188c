// grove check: prints check_session's report (grove/check.h): each output's largest error
// against the reference executor on the graph as imported and, on a mismatch, the first
// value that differs with the node that makes it and the plan's node that computes it.
#include <cstdio>
#include <random>

#include "cli/commands.h"
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
  Session session(engine, Model(std::move(imported), resolved, o.limits),
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

}  // namespace grove::cli

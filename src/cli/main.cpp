// The `grove` command: argument parsing and the one place errors become exit codes.
//   0: success   1: grove::Error (bad model, bad input file, unsupported op...)   2: usage error
//   3: grove check found outputs that differ from the reference
#include <CLI/CLI.hpp>

#include <cstdio>
#include <exception>
#include <thread>

#include "cli/commands.h"
#include "graph/error.h"

#ifndef GROVE_VERSION
#define GROVE_VERSION "0.1.0"  // keep in step with project(grove VERSION ...) in CMakeLists.txt
#endif

namespace {

using namespace grove::cli;

constexpr const char* kMainFooter = R"(
With no subcommand, grove runs the demo: a small CNN embedded in the binary.

Examples:
  grove                                    run the embedded demo model
  grove info model.onnx                    inputs, outputs, op histogram, parameters, GFLOPs
  grove info model.onnx --shape input_ids=1x128
  grove run model.onnx                     run on seeded random inputs, print output summaries
  grove run model.onnx --input image=cat.npy --output out/
  grove check model.onnx                   the optimized plan against the reference; names a differing node
  grove generate gpt2.onnx --prompt-ids 464,3290 -n 32   token-by-token generation with a KV cache
  grove serve --model resnet=resnet50.onnx  serve over HTTP (KServe v2), see grove serve --help

Exit status: 0 success, 1 error (message on stderr as "grove: error: ..."), 2 usage error,
3 grove check found a mismatch.
Run 'grove <subcommand> --help' for the options of each subcommand.
)";

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"grove " GROVE_VERSION ": runs ONNX models on the CPU.", "grove"};
  app.footer(kMainFooter);
  app.set_version_flag("--version", "grove " GROVE_VERSION);
  app.require_subcommand(0, 1);

  // Declared in order: --help lists them so.
  InfoOptions info_options;
  RunOptions run_options;
  CheckOptions check_options;
  PlanCliOptions plan_options;
  BenchOptions bench_options;
  ServeOptions serve_options;
  LoadOptions load_options;
  QuantizeCliOptions quantize_options;
  SimulateOptions sim_options;
  TailOptions tail_options;
  TuneOptions tune_options;
  GenerateCliOptions generate_options;
  CLI::App* info = add_info_command(app, info_options);
  CLI::App* run = add_run_command(app, run_options);
  CLI::App* check = add_check_command(app, check_options);
  CLI::App* plan = add_plan_command(app, plan_options);
  CLI::App* bench = add_bench_command(app, bench_options);
  CLI::App* serve = add_serve_command(app, serve_options);
  CLI::App* load = add_load_command(app, load_options);
  CLI::App* quantize = add_quantize_command(app, quantize_options);
  CLI::App* simulate = add_simulate_command(app, sim_options);
  CLI::App* tail = add_tail_command(app, tail_options);
  CLI::App* tune = add_tune_command(app, tune_options);
  CLI::App* generate = add_generate_command(app, generate_options);
  app.add_subcommand("demo", "Run the small demo CNN embedded in this binary (the default without a subcommand)");

  try {
    app.parse(argc, argv);
  } catch (const CLI::ParseError& e) {
    int code = app.exit(e);  // prints help/version to stdout, usage errors to stderr
    return code == 0 ? 0 : 2;
  }

  try {
    if (info->parsed()) return run_info(info_options);
    if (run->parsed()) return run_run(run_options);
    if (check->parsed()) return run_check(check_options);
    if (plan->parsed()) return run_plan(plan_options);
    if (bench->parsed()) return run_bench(bench_options);
    if (tail->parsed()) return run_tail(tail_options);
    if (tune->parsed()) return run_tune(tune_options);
    if (generate->parsed()) return run_generate(generate_options);
    if (simulate->parsed()) return run_simulate(sim_options);
    if (serve->parsed()) return run_serve(serve_options);
    if (load->parsed()) return run_load(load_options);
    if (quantize->parsed()) return run_quantize(quantize_options);
    return run_demo();
  } catch (const grove::Error& e) {
    std::fprintf(stderr, "grove: error: %s\n", e.what());
  } catch (const std::bad_alloc&) {
    std::fprintf(stderr, "grove: error: out of memory\n");
  } catch (const std::exception& e) {
    std::fprintf(stderr, "grove: error: internal error: %s\n", e.what());
  }
  return 1;
}

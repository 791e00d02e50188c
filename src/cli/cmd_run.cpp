// grove run: load one or more models, bind shapes, run them (tile runtime or reference
// executor), print and save outputs. Several models co-execute in one engine.
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <random>
#include <set>
#include <thread>

#include "cli/commands.h"
#include "cli/options.h"
#include "cli/format.h"
#include "cli/inputs.h"
#include "cli/subnets.h"
#include "cli/summary.h"
#include "runtime/session.h"
#include "npy/npy.h"
#include "onnx/import.h"

namespace grove::cli {
namespace {

using Clock = std::chrono::steady_clock;

double seconds_since(Clock::time_point t) { return std::chrono::duration<double>(Clock::now() - t).count(); }

// A file name for an output: ONNX names may hold '/', ':' and worse. Keeps [A-Za-z0-9._-],
// replaces the rest with '_', never starts with '.', and makes each name unique.
std::string output_file_stem(const std::string& name, std::set<std::string>& used) {
  std::string stem;
  for (char c : name.substr(0, 200)) {
    bool ok = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '.' || c == '_' ||
              c == '-';
    stem += ok ? c : '_';
  }
  if (stem.empty() || stem[0] == '.') stem = "_" + stem;
  std::string unique = stem;
  for (int i = 2; used.count(unique); ++i) unique = stem + "_" + std::to_string(i);
  used.insert(unique);
  return unique;
}

// Done before the run, so a bad --output fails fast instead of after a long inference.
void create_output_dir(const std::string& dir) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec || !std::filesystem::is_directory(dir))
    throw Error(dir + ": cannot create the output directory" + (ec ? " (" + ec.message() + ")" : ""));
}

void write_outputs(const Graph& g, const TensorMap& outputs, const std::string& dir) {
  std::set<std::string> used;
  for (const auto& decl : g.outputs) {
    std::string path = (std::filesystem::path(dir) / (output_file_stem(decl.name, used) + ".npy")).string();
    write_npy(path, outputs.at(decl.name));
    std::printf("wrote %s\n", path.c_str());
  }
}

// A shape whose byte count overflows or exceeds any real memory is a mistake (often a
// dim_value of a placeholder): say so instead of failing inside an allocation.
// Before random data is made for it: an input must fit the memory limit on its own.
void check_input_size(const std::string& model, const std::string& name, const Shape& shape, DType dtype,
                      const Limits& limits) {
  double elements = 1;
  for (int64_t d : shape) elements *= static_cast<double>(d);
  const double bytes = elements * static_cast<double>(dtype_size(dtype));
  if (bytes > static_cast<double>(limits.memory_limit()))
    throw Error(model + ": input '" + name + "' of shape " + bracket_shape(shape) + " would hold " +
                strf("%.3g", elements) + " elements (" + strf("%.3g", bytes) + " bytes), over the memory limit of " + std::to_string(limits.memory_limit()) +
                " bytes; give a smaller shape with --shape " + name + "=... (or raise --max-memory)");
}

// One model with its inputs, ready to run.
struct LoadedModel {
  std::string path;
  Graph imported;
  TensorMap inputs;
  ShapeMap shapes;
  std::vector<std::string> randomised;
};

LoadedModel load_model(const RunOptions& o, const std::string& path, const ShapeMap& all_shapes) {
  LoadedModel m;
  m.path = path;
  m.imported = load_onnx(path, o.limits);
  // With several models, each takes the --shape entries that name one of its inputs.
  ShapeMap shapes;
  for (const auto& [name, shape] : all_shapes)
    if (o.models.size() == 1 || m.imported.find_input(name)) shapes[name] = shape;
  m.inputs = load_input_files(m.imported, o.inputs, shapes);
  ShapeMap resolved = resolve_input_shapes(m.imported, shapes);
  for (const auto& [name, shape] : resolved)
    check_input_size(path, name, shape, m.imported.find_input(name)->dtype, o.limits);
  std::mt19937_64 rng(o.seed);
  for (const auto& decl : m.imported.inputs) {
    if (m.inputs.count(decl.name)) continue;
    try {
      m.inputs[decl.name] = random_tensor(decl.dtype, resolved.at(decl.name), rng);
    } catch (const Error& e) {
      throw e.prefixed(path + ": input '" + decl.name + "': cannot make random data: ");
    }
    m.randomised.push_back(decl.name);
  }
  m.shapes = resolved;
  return m;
}

void print_report(const RunOptions& o, const LoadedModel& m, const TensorMap& outputs, const std::string& how) {
  const Graph& g = m.imported;
  std::printf("model: %s\n", m.path.c_str());
  std::printf("inputs:\n");
  for (const auto& decl : g.inputs) {
    const Tensor& t = m.inputs.at(decl.name);
    bool random = std::find(m.randomised.begin(), m.randomised.end(), decl.name) != m.randomised.end();
    std::printf("  %s: %s %s  %s\n", decl.name.c_str(), std::string(dtype_name(t.dtype())).c_str(),
                bracket_shape(t.shape()).c_str(),
                random ? strf("random (seed %llu)", static_cast<unsigned long long>(o.seed)).c_str() : "from file");
  }
  for (const auto& decl : g.defaults)
    if (m.inputs.count(decl.name))
      std::printf("  %s: %s %s  from file (overrides the initializer)\n", decl.name.c_str(),
                  std::string(dtype_name(m.inputs.at(decl.name).dtype())).c_str(),
                  bracket_shape(m.inputs.at(decl.name).shape()).c_str());
  std::printf("outputs:\n");
  for (const auto& decl : g.outputs) std::fputs(summarize_output(decl.name, outputs.at(decl.name)).c_str(), stdout);
  std::printf("%s\n", how.c_str());
}

std::string executor_words(const RunOptions& o, int threads) {
  return strf("tile runtime, %s schedule, %d thread%s", o.schedule.c_str(), threads, threads == 1 ? "" : "s");
}

}  // namespace

void write_trace(Engine& engine, const std::string& path, std::FILE* say) {
  std::ofstream f(path);
  if (!f) throw Error(path + ": cannot write the trace file");
  f << engine.stop_trace_json();
  std::fprintf(say, "trace: %s (open in https://ui.perfetto.dev or chrome://tracing)\n", path.c_str());
}

namespace {

int run_single(const RunOptions& o, LoadedModel m) {
  auto t0 = Clock::now();
  if (!o.output_dir.empty()) create_output_dir(o.output_dir);
  TensorMap outputs;
  std::string how;
  if (o.executor == "reference") {
    if (!o.subnet.empty()) throw Error("--subnet runs on the tile runtime; drop --executor reference");
    Model model = model_from_graph(m.imported, m.shapes, o.limits);
    double load_s = seconds_since(t0);
    auto t1 = Clock::now();
    outputs = model.run_reference(m.inputs);
    how = "latency: " + milliseconds(seconds_since(t1)) + " (reference executor, single-threaded)\n" +
          "shape binding: " + milliseconds(load_s);
    if (!model.is_bound()) how = "note: shapes depend on input values, so the graph ran unbound\n" + how;
  } else {
    Engine engine({.threads = o.threads});
    const SessionOptions options{.schedule = o.schedule == "barrier" ? Schedule::barrier : Schedule::aspen,
                                 .tiles_per_op = o.tiles_per_op,
                                 .precision = parse_precision(o.precision),
                                 .conv_layout = parse_layout(o.layout),
                                 .feature_pruning = feature_pruning_option(o.prune),
                                 .tuning = o.tuning};
    std::unique_ptr<Session> whole;
    SubnetPick pick;
    Session* session = nullptr;
    if (o.subnet.empty()) {
      whole = std::make_unique<Session>(engine, model_from_graph(m.imported, m.shapes, o.limits), options);
      session = whole.get();
    } else {
      pick = open_subnets(engine, m.imported, m.path, options, o.subnet);
      if (pick.indices.size() != 1) throw Error("--subnet " + o.subnet + ": grove run runs one sub-net; name one");
      session = &pick.session->session(pick.indices[0]);
      std::printf("sub-net: %s\n", describe_subnet(pick.session->subnets()[pick.indices[0]]).c_str());
    }
    auto plan = plan_for(*session, m.shapes);
    double plan_s = seconds_since(t0);
    if (plan && o.precision != "fp32") std::printf("precision: %s\n", plan->precision.note.c_str());
    const std::string tried = plan_trial_verdict(*session);  // a model's plan tried against the rules'
    if (!tried.empty()) std::printf("tuning: %s\n", tried.c_str());
    else if (plan && !plan->options.choices_source.empty()) std::printf("tuning: %s\n", plan->options.choices_source.c_str());
    if (plan && plan->pruning.gates > 0) std::printf("%s\n", pruning_summary(plan->pruning).c_str());
    if (!o.trace_path.empty()) engine.start_trace();
    RunStats stats;
    auto t1 = Clock::now();
    outputs = session->run(m.inputs, &stats);
    double run_s = seconds_since(t1);
    if (stats.used_reference && feeds_defaults(m.imported, m.inputs)) {
      how = "note: an initializer was fed as an input, so the reference executor ran a copy bound with it\n"
            "latency: " + milliseconds(run_s) + " (reference executor)";
    } else if (stats.used_reference) {
      how = "note: shapes depend on input values, so the reference executor ran the graph unbound\n"
            "latency: " + milliseconds(run_s) + " (reference executor)";
    } else if (stats.segment_runs > 0) {
      how = "note: the model has control flow (If, Loop, Scan), so it ran as " + std::to_string(stats.segment_runs) +
            " planned segments, one after another (docs/control-flow.md)\n"
            "latency: " + milliseconds(run_s) + " (" + executor_words(o, engine.threads()) + ")";
    } else if (plan) {
      how = "latency: " + milliseconds(run_s) + " (" + executor_words(o, engine.threads()) + ")\n" +
            strf("tiles: %d, edges: %lld; peak activations: %.2f MB\n", plan->tiles.size(),
                 static_cast<long long>(plan->tiles.edge_count()), stats.peak_activation_bytes / 1e6) +
            "binding and planning: " + milliseconds(plan_s);
    }
    if (!o.trace_path.empty()) write_trace(engine, o.trace_path);
  }
  print_report(o, m, outputs, how);
  if (!o.output_dir.empty()) write_outputs(m.imported, outputs, o.output_dir);
  return 0;
}

// Several models submitted together: their tiles share one ready pool.
int run_together(const RunOptions& o, std::vector<LoadedModel> models) {
  if (o.executor == "reference") throw Error("--executor reference runs one model at a time; give one model");
  if (!o.output_dir.empty()) throw Error("--output needs a single model");
  Engine engine({.threads = o.threads});
  std::vector<std::unique_ptr<Session>> sessions;
  for (auto& m : models) {
    sessions.push_back(std::make_unique<Session>(
        engine, model_from_graph(m.imported, m.shapes, o.limits),
        SessionOptions{.schedule = o.schedule == "barrier" ? Schedule::barrier : Schedule::aspen,
                       .tiles_per_op = o.tiles_per_op,
                       .precision = parse_precision(o.precision),
                       .conv_layout = parse_layout(o.layout),
                       .tuning = o.tuning}));
    if (!plan_for(*sessions.back(), m.shapes))
      throw Error(m.path + ": shapes depend on input values; such models run alone (one model per grove run)");
  }
  if (!o.trace_path.empty()) engine.start_trace();
  auto t0 = Clock::now();
  std::vector<std::future<TensorMap>> pending;
  for (size_t i = 0; i < models.size(); ++i) pending.push_back(sessions[i]->submit(models[i].inputs));
  // Poll so each model's own finishing time is recorded, whatever order they finish in.
  std::vector<double> done_s(models.size(), -1);
  for (size_t left = models.size(); left > 0;) {
    for (size_t i = 0; i < models.size(); ++i)
      if (done_s[i] < 0 && pending[i].wait_for(std::chrono::microseconds(200)) == std::future_status::ready) {
        done_s[i] = seconds_since(t0);
        --left;
      }
  }
  double total_s = seconds_since(t0);
  for (size_t i = 0; i < models.size(); ++i) {
    TensorMap outputs = pending[i].get();
    print_report(o, models[i], outputs, "finished after: " + milliseconds(done_s[i]) + " (co-executing)");
    std::printf("\n");
  }
  std::printf("all %zu models: %s (%s)\n", models.size(), milliseconds(total_s).c_str(),
              executor_words(o, engine.threads()).c_str());
  if (!o.trace_path.empty()) write_trace(engine, o.trace_path);
  return 0;
}

}  // namespace

std::string feature_pruning_option(const std::string& text) {
  std::string out = text;
  std::replace(out.begin(), out.end(), ';', '\n');
  return out;
}

Precision parse_precision(const std::string& text) {
  if (text == "fp32") return Precision::fp32;
  if (text == "bf16") return Precision::bf16;
  if (text == "int8w") return Precision::int8_weights;
  if (text == "int8")
    throw Error("--precision int8 quantizes a float model in grove bench only; elsewhere run a QDQ model: "
                "grove quantize MODEL --calibrate DIR -o MODEL.int8.onnx (docs/quantization.md)");
  throw Error("--precision " + text + ": expected fp32, bf16 or int8w");
}

ConvLayout parse_layout(const std::string& text) {
  if (text == "nhwc") return ConvLayout::channels_last;
  if (text == "nchw") return ConvLayout::nchw;
  throw Error("--layout " + text + ": expected nhwc or nchw");
}

ShapeMap parse_shape_options(const std::vector<std::string>& texts) {
  ShapeMap shapes;
  for (const auto& text : texts) {
    auto [name, shape] = parse_shape_binding(text);
    if (shapes.count(name)) throw Error("--shape: input '" + name + "' is given twice");
    shapes[name] = shape;
  }
  return shapes;
}

int run_run(const RunOptions& o) {
  ShapeMap shapes = parse_shape_options(o.shapes);
  if (o.models.size() > 1 && !o.inputs.empty())
    throw Error("--input needs a single model; several models run on seeded random inputs");
  std::vector<LoadedModel> models;
  for (const auto& path : o.models) models.push_back(load_model(o, path, shapes));
  if (o.models.size() > 1) {
    for (const auto& entry : shapes) {
      const std::string& name = entry.first;  // not a structured binding: the lambda captures it
      bool used = std::any_of(models.begin(), models.end(), [&](const LoadedModel& m) { return m.imported.find_input(name); });
      if (!used) throw Error("--shape: no model has an input named '" + name + "'");
    }
    return run_together(o, std::move(models));
  }
  return run_single(o, std::move(models[0]));
}

constexpr const char* kRunCommandFooter = R"(
Inputs: each model input comes from --input NAME=FILE.npy when given (dtype and shape must
match the model; .npy files are C-order, little-endian: float32, int64, int32, bool, ...).
Other inputs get seeded random data of the bound shape: floats uniform in [-1, 1), integers
in [0, 100) (so token ids and indices stay valid), bools 0/1. The same --seed gives the same
data every time.

Outputs: a summary per output (dtype, shape, min/max/mean; the top-5 indices for a
classifier-shaped float output [N] or [1, N]). With --output DIR each output is also saved
as DIR/<output name>.npy, with characters other than letters, digits, '.', '_' and '-'
replaced by '_'.

Execution: by default the tile runtime: every op's output is cut into tiles, and one worker
per core walks the whole model's tile graph with no barrier between ops (--schedule barrier
runs the same tiles op by op, for comparison). --executor reference runs the naive,
single-threaded oracle instead. Models whose shapes depend on input values run on the
reference executor. The latency printed is of the run alone, without loading and planning.
Several model files co-execute in one engine (random inputs), each reported separately.

Examples:
  grove run resnet50.onnx
  grove run resnet50.onnx --input data=image.npy --output results/
  grove run bert.onnx --shape input_ids=1x128 --shape attention_mask=1x128 --seed 7
  grove run resnet50.onnx --threads 2 --schedule barrier --trace trace.json
  grove run resnet50.onnx bert.onnx --shape input_ids=1x128
)";


CLI::App* add_run_command(CLI::App& app, RunOptions& o) {
  CLI::App* cmd = app.add_subcommand("run", "Run a model on .npy or random inputs and summarise its outputs");
  cmd->footer(kRunCommandFooter);
  cmd->add_option("model", o.models, "The .onnx file; several files co-execute in one engine")
      ->required();
  add_input_option(cmd, o.inputs,
                   "Input from a .npy file: NAME=FILE.npy (or FILE.npy when the model has one input). Repeat "
                  "for each input; inputs not given get seeded random data");
  add_shape_option(cmd, o.shapes);
  cmd->add_option("--output,-o", o.output_dir,
                  "Directory to save each output as <output name>.npy (created if missing). Default: save nothing")
      ->type_name("DIR");
  add_threads_option(cmd, o.threads);
  cmd->add_option("--executor", o.executor,
                  "tiles: the tile dataflow runtime; reference: the naive op-by-op oracle (single-threaded)")
      ->capture_default_str()
      ->check(CLI::IsMember({"tiles", "reference"}));
  add_schedule_option(cmd, o.schedule,
                      "aspen: no barriers between ops; barrier: op by op, the baseline (same tiles and kernels)");
  cmd->add_option("--tiles-per-op", o.tiles_per_op, "Target tiles per op (0: by rule)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  add_precision_option(cmd, o.precision, {"fp32", "bf16", "int8", "int8w"});
  add_tuning_option(cmd, o.tuning);
  add_layout_option(cmd, o.layout);
  cmd->add_option("--trace", o.trace_path,
                  "Write a Chrome/Perfetto trace (one track per worker, one slice per tile) to this .json file")
      ->type_name("FILE");
  cmd->add_option("--subnet", o.subnet, kSubnetHelp)->type_name("NAME|RATIO");
  cmd->add_option("--prune", o.prune, kPruneHelp)->type_name("off|STATEMENTS");
  add_seed_option(cmd, o.seed);

  add_limit_options(cmd, o.limits);
  return cmd;
}

}  // namespace grove::cli

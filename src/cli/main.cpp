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
  grove serve --model resnet=resnet50.onnx  serve over HTTP (KServe v2), see grove serve --help

Exit status: 0 success, 1 error (message on stderr as "grove: error: ..."), 2 usage error,
3 grove check found a mismatch.
Run 'grove <subcommand> --help' for the options of each subcommand.
)";

constexpr const char* kCheckFooter = R"(
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

constexpr const char* kShapeHelp =
    "Binds an input's shape: NAME=DIMS with dims separated by 'x', e.g. --shape input=1x3x224x224. "
    "Needed for inputs with symbolic (dynamic) dims; checked against fixed dims. Repeat for each input.";

constexpr const char* kPruneHelp =
    "Dynamic feature-map pruning (Antidote, docs/dynamic.md): by default a model's grove.antidote metadata "
    "applies; 'off' runs it unpruned; or statements such as 'prune relu1.out channels=0.5 positions=0.75', "
    "several separated by ';'";
constexpr const char* kPrecisionHelp =
    "Arithmetic of Conv/MatMul/Gemm with constant weights: fp32, or bf16 (bfloat16 operands, float32 "
    "accumulation, on AMX tiles where the CPU has them, else AVX512-BF16; runs fp32 with a note on CPUs without either). Everything else stays fp32. "
    "docs/precision.md";
constexpr const char* kLayoutHelp =
    "Activation layout of float convs: nhwc runs each chain of convs the channels-last rule takes on NHWC "
    "activations (Transposes where NCHW ops meet them; Winograd layers, still on Winograd from 64 input channels, "
    "and stems of few input channels go channels-last only beside convs that pay for their Transposes; grouped "
    "convs stay NCHW), nchw runs every conv as the model is written. docs/layout.md";
constexpr const char* kTuningHelp =
    "Per-Conv primitives and tile grids from grove tune: auto uses the tuning record made for this model, CPU, "
    "thread count and precision when there is one, else this CPU's performance model (grove tune --fit) when "
    "there is one; record or model uses only that; off plans by the hand rules; or the path of a record file. "
    "docs/tuning.md";
constexpr const char* kSubnetHelp =
    "Dynamic model (metadata grove.subnets): the sub-net to run, by name or width ratio. Any other model: "
    "slice it uniformly at this width ratio (a latency study: the narrower net is untrained). docs/dynamic.md.";

constexpr const char* kQuantizeFooter = R"(
Post-training static quantization. The float model runs on every calibration sample; the
range of each activation that a quantized op reads or writes is recorded; then Conv, MatMul
and Gemm with constant weights get int8 weights (symmetric, per output channel), int32
biases, and uint8 activations (asymmetric, per tensor) through QuantizeLinear /
DequantizeLinear pairs. The result is a standard QDQ model: grove runs it on its integer
kernels, and ONNX Runtime runs it too. A few dozen representative inputs are usually enough.

Example:
  grove quantize resnet50.onnx --calibrate samples/ -o resnet50.int8.onnx
  grove bench resnet50.int8.onnx
docs/quantization.md has the accuracy and speed measured.
)";

constexpr const char* kRunFooter = R"(
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

constexpr const char* kInfoFooter = R"(
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

constexpr const char* kServeFooter = R"(
Endpoints (the Open Inference Protocol v2, as KServe and Triton define it):
  GET  /v2/health/live, /v2/health/ready      200 when live / ready (503 while shutting down)
  GET  /v2                                    server metadata and extensions
  GET  /v2/models/NAME[/versions/1]           model metadata: inputs, outputs, datatypes, shapes
  GET  /v2/models/NAME/ready
  POST /v2/models/NAME[/versions/1]/infer     JSON tensors, or the binary tensor data extension
                                              (header Inference-Header-Content-Length)
  POST /v2/repository/index                   models and their state
  POST /v2/repository/models/NAME/load|unload
  GET  /metrics                               Prometheus: requests, failures, latency histograms
                                              per model; engine tiles, busy time, jobs in flight
Every model runs on the one engine: each request is a job in the same ready pool, so requests
of all models share the cores tile by tile. Errors are JSON {"error": "..."}: 404 unknown model,
400 bad request (name, shape, datatype, JSON, JSON nested over 64 levels), 408 request not
received in time (headers 5 s, body 30 s), 413 body too large, 415 compressed or multipart
body, 431 headers over 64 KiB, 503 busy or shutting down, 504 timeout, 500 a failing
inference (naming the node and op). SIGTERM or SIGINT: stop
accepting, finish the requests in flight, exit 0.

Examples:
  grove serve --model resnet=resnet50.onnx --model bert=bert.onnx --port 8000
  curl localhost:8000/v2/models/resnet
  curl -d '{"inputs":[{"name":"x","shape":[1,4],"datatype":"FP32","data":[1,2,3,4]}]}'        localhost:8000/v2/models/tiny/infer
  grove load http://127.0.0.1:8000 --model resnet -c 8 -n 500
)";

constexpr const char* kLoadFooter = R"(
Reads the model's metadata from the server, builds one request of seeded random inputs
(floats in [-1, 1), integers in [0, 100), bools; dynamic dims as 1) and sends it --requests
times from --concurrency clients with keep-alive connections. Prints throughput, latency
p50/p90/p99, errors by status, and how many answers differed from the first (a deterministic
server: 0). Exit status 1 when any request failed or differed.

Examples:
  grove load http://127.0.0.1:8000 --model resnet -c 16 -n 1000
  grove load http://127.0.0.1:8000 --model bert --binary --json
)";

// --max-memory, --max-nodes, --max-tiles and --max-loop-iterations on a subcommand (docs/security.md).
void add_limit_options(CLI::App* cmd, grove::Limits& limits) {
  cmd->add_option("--max-memory", limits.max_memory,
                  "Most bytes of weights plus declared activations a model may make grove allocate; a larger "
                  "model is an error before anything is allocated (0: half the machine's physical memory)")
      ->type_name("BYTES")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-nodes", limits.max_nodes, "Most nodes a model may have, those in subgraphs included")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-tiles", limits.max_tiles,
                  "Most tiles a plan may cut the model into (and 16 dependency edges per tile)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-loop-iterations", limits.max_loop_iterations,
                  "Most iterations one Loop node may run in one inference (an endless loop becomes an error)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
}

}  // namespace

int main(int argc, char** argv) {
  CLI::App app{"grove " GROVE_VERSION ": runs ONNX models on the CPU.", "grove"};
  app.footer(kMainFooter);
  app.set_version_flag("--version", "grove " GROVE_VERSION);
  app.require_subcommand(0, 1);

  InfoOptions info_options;
  CLI::App* info = app.add_subcommand("info", "Describe a model: inputs, outputs, ops, parameters, GFLOPs");
  info->footer(kInfoFooter);
  info->add_option("model", info_options.model, "The .onnx file")->required();
  info->add_option("--shape", info_options.shapes, kShapeHelp)->type_name("NAME=DIMS")->allow_extra_args(false);

  add_limit_options(info, info_options.limits);

  RunOptions run_options;
  CLI::App* run = app.add_subcommand("run", "Run a model on .npy or random inputs and summarise its outputs");
  run->footer(kRunFooter);
  run->add_option("model", run_options.models, "The .onnx file; several files co-execute in one engine")
      ->required();
  run->add_option("--input,-i", run_options.inputs,
                  "Input from a .npy file: NAME=FILE.npy (or FILE.npy when the model has one input). Repeat "
                  "for each input; inputs not given get seeded random data")
      ->type_name("NAME=FILE")
      ->allow_extra_args(false);
  run->add_option("--shape", run_options.shapes, kShapeHelp)->type_name("NAME=DIMS")->allow_extra_args(false);
  run->add_option("--output,-o", run_options.output_dir,
                  "Directory to save each output as <output name>.npy (created if missing). Default: save nothing")
      ->type_name("DIR");
  run->add_option("--threads,-t", run_options.threads, "Worker threads (0: the cores this process may use)")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096));
  run->add_option("--executor", run_options.executor,
                  "tiles: the tile dataflow runtime; reference: the naive op-by-op oracle (single-threaded)")
      ->capture_default_str()
      ->check(CLI::IsMember({"tiles", "reference"}));
  run->add_option("--schedule", run_options.schedule,
                  "aspen: no barriers between ops; barrier: op by op, the baseline (same tiles and kernels)")
      ->capture_default_str()
      ->check(CLI::IsMember({"aspen", "barrier"}));
  run->add_option("--tiles-per-op", run_options.tiles_per_op, "Target tiles per op (0: by rule)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 20));
  run->add_option("--precision", run_options.precision, kPrecisionHelp)
      ->capture_default_str()
      ->check(CLI::IsMember({"fp32", "bf16", "int8"}));
  run->add_option("--tuning", run_options.tuning, kTuningHelp)->capture_default_str()->type_name("auto|off|FILE");
  run->add_option("--layout", run_options.layout, kLayoutHelp)->capture_default_str()->check(CLI::IsMember({"nchw", "nhwc"}));
  run->add_option("--trace", run_options.trace_path,
                  "Write a Chrome/Perfetto trace (one track per worker, one slice per tile) to this .json file")
      ->type_name("FILE");
  run->add_option("--subnet", run_options.subnet, kSubnetHelp)->type_name("NAME|RATIO");
  run->add_option("--prune", run_options.prune, kPruneHelp)->type_name("off|STATEMENTS");
  run->add_option("--seed", run_options.seed, "Seed for the random inputs")->capture_default_str();

  add_limit_options(run, run_options.limits);

  CheckOptions check_options;
  CLI::App* check = app.add_subcommand(
      "check", "Run the optimized plan and the reference executor on the same inputs; name the first differing node");
  check->footer(kCheckFooter);
  check->add_option("model", check_options.model, "The .onnx file")->required();
  check->add_option("--input,-i", check_options.inputs,
                    "Input from a .npy file: NAME=FILE.npy (or FILE.npy for a one-input model); the rest get seeded "
                    "random data")
      ->type_name("NAME=FILE")
      ->allow_extra_args(false);
  check->add_option("--shape", check_options.shapes, kShapeHelp)->type_name("NAME=DIMS")->allow_extra_args(false);
  check->add_option("--threads,-t", check_options.threads, "Worker threads (0: the cores this process may use)")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096));
  check->add_option("--schedule", check_options.schedule, "aspen or barrier")
      ->capture_default_str()
      ->check(CLI::IsMember({"aspen", "barrier"}));
  check->add_option("--precision", check_options.precision, kPrecisionHelp)
      ->capture_default_str()
      ->check(CLI::IsMember({"fp32", "bf16"}));
  check->add_option("--tuning", check_options.tuning, kTuningHelp)->capture_default_str()->type_name("auto|off|FILE");
  check->add_option("--layout", check_options.layout, kLayoutHelp)->capture_default_str()->check(CLI::IsMember({"nchw", "nhwc"}));
  check->add_option("--tolerance", check_options.tolerance,
                    "Largest error allowed, as a fraction of each output's largest magnitude (bf16: try 2e-2)")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  check->add_option("--seed", check_options.seed, "Seed for the random inputs")->capture_default_str();
  add_limit_options(check, check_options.limits);

  PlanCliOptions plan_options;
  CLI::App* plan = app.add_subcommand("plan", "Cut a model into tiles: tiles, grid and edges per op, depth, critical path");
  plan->add_option("model", plan_options.model, "The .onnx file")->required();
  plan->add_option("--shape", plan_options.shapes, kShapeHelp)->type_name("NAME=DIMS")->allow_extra_args(false);
  plan->add_option("--threads,-t", plan_options.threads, "Cores to cut tiles for (0: the cores this process may use)")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096));
  plan->add_option("--tiles-per-op", plan_options.tiles_per_op,
                   "Target tiles per op (0: about 2 per thread, none under 1 MFLOP)")
      ->capture_default_str()
      ->check(CLI::Range(0, 1 << 24));
  plan->add_option("--precision", plan_options.precision, kPrecisionHelp)
      ->capture_default_str()
      ->check(CLI::IsMember({"fp32", "bf16", "int8"}));
  plan->add_option("--tuning", plan_options.tuning, kTuningHelp)->capture_default_str()->type_name("auto|off|FILE");
  plan->add_option("--layout", plan_options.layout, kLayoutHelp)->capture_default_str()->check(CLI::IsMember({"nchw", "nhwc"}));
  plan->add_option("--min-tile-flops", plan_options.min_tile_flops, "Smallest tile in FLOPs (0: by rule)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  plan->add_option("--tile-counts", plan_options.tile_counts,
                   "Tiles per op when --tiles-per-op is 0: fixed (about 2 per thread) or tail (TA-DNN's staircase, "
                   "with what finer tiles repeat priced at this machine's measured cost per moved element)")
      ->capture_default_str()->check(CLI::IsMember({"fixed", "tail"}));
  plan->add_option("--schedule", plan_options.schedule, "aspen (tile dataflow) or barrier (op by op)")
      ->capture_default_str()
      ->check(CLI::IsMember({"aspen", "barrier"}));
  plan->add_flag("--totals", plan_options.totals_only, "Print the totals only, not every op");
  plan->add_flag("--json", plan_options.json,
                 "Print the plan as one JSON object: options, the machine probes it priced with and where they came "
                 "from, and per node its op, primitive, precision, tiles and grid (no timings: the same in every process)");
  plan->add_option("--save", plan_options.save_path,
                   "Write the TileGraph to this file (with the model's hash, bound shapes, options and grove's version)")
      ->type_name("FILE");
  plan->add_option("--load", plan_options.load_path,
                   "Load a saved TileGraph and check it against a fresh plan of the model with the same options")
      ->type_name("FILE");

  add_limit_options(plan, plan_options.limits);

  BenchOptions bench_options;
  CLI::App* bench = app.add_subcommand("bench", "Time a model: latency percentiles, throughput, memory");
  bench->footer(R"(
Runs the model on seeded random inputs (as grove run does) after --warmup untimed runs.
--schedule both interleaves the barrier-free and the op-by-op schedule run by run (A B A B),
on the same engine, tiles and kernels, so their ratio is measured side by side.
--precision both does the same for an fp32 and a bf16 session and prints the bf16 speedup;
--precision fp32,int8 quantizes the model in memory (calibrated on --calibrate DIR, else on
the bench inputs) and times it next to fp32. --check N then runs fp32 and each reduced
precision on N input sets and reports the largest output difference relative to the
output's largest magnitude, and top-1/top-5 agreement (docs/precision.md).
Several model files: co-execution. Each round runs every model once submitted together into
one engine and once one after the other (alternating which goes first); reports both medians,
inferences/s and the speedup. --input NAME=FILE.npy goes to the models with that input.

Examples:
  grove bench resnet50.onnx --threads 2 --runs 20
  grove bench bert.onnx --shape input_ids=1x128 --schedule both --json
  grove bench resnet50.onnx --precision both --check 20
  grove bench resnet50.onnx --precision fp32,int8 --calibrate samples/ --check 20
  grove bench resnet50.onnx bert.onnx --threads 2 --runs 10
  grove bench dynamic.onnx --subnet all
  grove bench dynamic.onnx --latency-target-ms 15 --co-run other.onnx --co-run-schedule 0:4s,1:4s,0:4s)");
  bench->add_option("model", bench_options.models, "The .onnx file; several: co-execution vs one after the other")
      ->required();
  bench->add_option("--input,-i", bench_options.inputs,
                    "Input from a .npy file: NAME=FILE.npy (e.g. valid token ids); others get seeded random data")
      ->type_name("NAME=FILE")
      ->allow_extra_args(false);
  bench->add_option("--shape", bench_options.shapes, kShapeHelp)->type_name("NAME=DIMS")->allow_extra_args(false);
  bench->add_option("--threads,-t", bench_options.threads, "Worker threads (0: the cores this process may use)")
      ->capture_default_str()->check(CLI::Range(0, 4096));
  bench->add_option("--runs,-r", bench_options.runs, "Timed runs (per schedule; rounds with several models)")->capture_default_str()->check(CLI::Range(1, 1000000));
  bench->add_option("--seconds,-s", bench_options.seconds, "Keep running until this many seconds (0: just --runs)")
      ->capture_default_str()->check(CLI::Range(0.0, 86400.0));
  bench->add_option("--warmup,-w", bench_options.warmup, "Untimed runs first (per schedule)")->capture_default_str()->check(CLI::Range(0, 1000));
  bench->add_option("--warmup-seconds", bench_options.warmup_seconds,
                    "Keep doing untimed runs until this many seconds have passed (at least --warmup runs): "
                    "a fresh process runs slower for its first few hundred milliseconds on some machines (docs/benchmarks.md)")
      ->capture_default_str()->check(CLI::Range(0.0, 3600.0));
  bench->add_option("--schedule", bench_options.schedule, "aspen, barrier, or both (interleaved)")
      ->capture_default_str()->check(CLI::IsMember({"aspen", "barrier", "both"}));
  bench->add_option("--tiles-per-op", bench_options.tiles_per_op, "Target tiles per op (0: by rule)")
      ->capture_default_str()->check(CLI::Range(0, 1 << 20));
  bench->add_option("--tile-counts", bench_options.tile_counts,
                    "Tiles per op when --tiles-per-op is 0: fixed (about 2 per thread), tail (TA-DNN's staircase: "
                    "the count whose waves on the threads cost least, docs/scaling.md), or both (interleaved)")
      ->capture_default_str()->check(CLI::IsMember({"fixed", "tail", "both"}));
  bench->add_option("--precision", bench_options.precision,
                    std::string(kPrecisionHelp) +
                        " int8 quantizes the float model in memory as grove quantize does (calibrated on --calibrate's "
                        "samples, else on the benchmark's inputs) and runs it on the integer kernels. 'both' times fp32 "
                        "and bf16 interleaved and prints the speedup; a comma list (fp32,int8 or fp32,bf16,int8) times "
                        "each of them so.")
      ->capture_default_str()
      ->type_name("fp32|bf16|int8|both|LIST");
  bench->add_option("--calibrate", bench_options.calibrate_dir,
                    "--precision int8: calibrate on these samples (.npy files, or one subdirectory of NAME.npy per "
                    "sample for several inputs), as grove quantize --calibrate")
      ->type_name("DIR");
  bench->add_option("--tuning", bench_options.tuning,
                    std::string(kTuningHelp) + " 'both' times the model untuned and tuned, interleaved; 'compare' "
                    "times it untuned, with the performance model's choices and with the record's.")
      ->capture_default_str()->type_name("auto|off|model|record|both|compare|FILE");
  bench->add_option("--layout", bench_options.layout,
                    std::string(kLayoutHelp) + " 'both' times the two interleaved and prints the speedup.")
      ->capture_default_str()
      ->check(CLI::IsMember({"nchw", "nhwc", "both"}));
  bench->add_option("--check", bench_options.check,
                    "Also run fp32 and each reduced precision of --precision (bf16 if none) on N input sets (the bench "
                    "inputs, then seeded random ones) and report "
                    "the largest output difference relative to the output's largest magnitude, and top-1/top-5 "
                    "agreement of the rows of float outputs")
      ->type_name("N")
      ->check(CLI::Range(0, 100000));
  bench->add_option("--prune", bench_options.prune,
                    std::string(kPruneHelp) + ". 'both' times the model unpruned and as its metadata prunes it, "
                    "interleaved, and prints the speedup next to the share of FLOPs kept.")
      ->type_name("off|both|STATEMENTS");
  bench->add_flag("--json", bench_options.json, "Print one JSON object instead of the table");
  bench->add_flag("--mt-graph", bench_options.mt_graph,
                  "With several models: search MT-Graph stage pointers by coordinate descent on measured latency, "
                  "then compare the best schedule with plain co-execution, one after the other and split cores");
  bench->add_option("--mt-pointers", bench_options.mt_pointers, "MT-Graph: stage boundaries per model")
      ->capture_default_str()
      ->check(CLI::Range(1, 16));
  bench->add_option("--mt-rounds", bench_options.mt_rounds, "MT-Graph: coordinate descent rounds")
      ->capture_default_str()
      ->check(CLI::Range(1, 100));
  bench->add_option("--mt-candidates", bench_options.mt_candidates, "MT-Graph: pointer rows sampled per model per round")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  bench->add_option("--mt-profile-runs", bench_options.mt_profile_runs, "MT-Graph: runs per profiled schedule (median)")
      ->capture_default_str()
      ->check(CLI::Range(1, 1000));
  bench->add_option("--slow-worker", bench_options.slow_worker,
                    "Uneven cores test mode: worker thread 0 takes this many times as long over each tile "
                    "(docs/scaling.md; 1: off)")
      ->capture_default_str()->check(CLI::Range(1.0, 100.0));
  bench->add_option("--workers-schedule", bench_options.workers_schedule,
                    "Elastic workers: phases WORKERS:SECONDS, e.g. 1:2s,2:2s,1:2s; the worker count changes while "
                    "runs are in flight, and each phase's throughput is printed")
      ->type_name("N:S,...");
  bench->add_option("--subnet", bench_options.subnet,
                    std::string(kSubnetHelp) + " `all`: every sub-net, interleaved, with its first and warm latency")
      ->type_name("NAME|RATIOS|all");
  bench->add_option("--latency-target-ms", bench_options.latency_target_ms,
                    "Dynamic model: each run takes the widest sub-net predicted to meet this P99 target under "
                    "the current load; prints P99 and the sub-nets run per 1-second window, then the same "
                    "with the full model on every run (docs/dynamic.md)")
      ->check(CLI::Range(0.0, 1e6));
  bench->add_option("--co-run", bench_options.co_run,
                    "With --latency-target-ms: a model run on the same engine as load, in the number of streams "
                    "--co-run-schedule gives")
      ->type_name("MODEL");
  bench->add_flag("--urgent", bench_options.urgent,
                  "With --subnet or --latency-target-ms: the timed model's tiles go ahead of the --co-run load's "
                  "in the ready pool (SessionOptions::urgent)");
  bench->add_option("--co-run-schedule", bench_options.co_run_schedule,
                    "Load phases STREAMS:SECONDS, e.g. 0:3s,1:3s,0:3s (0 streams: no load)")
      ->capture_default_str()
      ->type_name("N:S,...");
  bench->add_option("--seed", bench_options.seed, "Seed for the random inputs")->capture_default_str();
  bench->add_option("--trace", bench_options.trace_path,
                    "After the timed runs, one more warm run per schedule traced to this .json file (Chrome/Perfetto)")
      ->type_name("FILE");

  add_limit_options(bench, bench_options.limits);

  ServeOptions serve_options;
  CLI::App* serve = app.add_subcommand("serve", "Serve models over HTTP: the KServe v2 inference protocol and /metrics");
  serve->footer(kServeFooter);
  serve->add_option("--model", serve_options.models, "A model to serve, as NAME=PATH.onnx; repeat for more")
      ->type_name("NAME=PATH");
  serve->add_option("--model-repository", serve_options.model_repository,
                    "A directory of models (NAME.onnx, NAME/model.onnx or NAME/1/model.onnx): all are loaded at start, "
                    "and the repository API loads and unloads them by name")
      ->type_name("DIR");
  serve->add_option("--host", serve_options.host, "Address to listen on")->capture_default_str();
  serve->add_option("--port", serve_options.port, "Port to listen on (0: any free port, printed at start)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  serve->add_option("--threads", serve_options.threads, "Engine workers shared by every model (0: one per available core)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  serve->add_option("--http-threads", serve_options.http_threads,
                    "Connections served at once (each keep-alive client holds one while connected; "
                    "0: as many as --max-concurrent)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  serve->add_option("--max-concurrent", serve_options.max_concurrent,
                    "Inferences in flight at once, and connections held (served or waiting for an HTTP thread); "
                    "more get 503")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  serve->add_option("--max-body-bytes", serve_options.max_body_bytes, "Largest request body; larger get 413")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  serve->add_option("--request-timeout", serve_options.request_timeout_s,
                    "Seconds an inference may take before the client gets 504")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  serve->add_option("--max-batch", serve_options.max_batch,
                    "Dynamic batching: join requests that arrive together into runs of up to this many rows "
                    "(dimension 0), for models whose inputs and outputs all have a free first dimension (0: off)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  serve->add_option("--batch-delay-ms", serve_options.batch_delay_ms,
                    "Dynamic batching: how long a request may wait for others to join its batch")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  serve->add_option("--tuning", serve_options.tuning, kTuningHelp)->capture_default_str()->check(CLI::IsMember({"auto", "off"}));
  serve->add_option("--layout", serve_options.layout, kLayoutHelp)->capture_default_str()->check(CLI::IsMember({"nchw", "nhwc"}));
  serve->add_option("--precision", serve_options.precision, kPrecisionHelp)
      ->capture_default_str()
      ->check(CLI::IsMember({"fp32", "bf16", "int8"}));
  add_limit_options(serve, serve_options.limits);

  LoadOptions load_options;
  CLI::App* load = app.add_subcommand("load", "Load-test a KServe v2 server: throughput and latency percentiles");
  load->footer(kLoadFooter);
  load->add_option("url", load_options.url, "The server")->capture_default_str();
  load->add_option("--model", load_options.model, "Model name on the server")->required();
  load->add_option("--concurrency,-c", load_options.concurrency, "Clients sending at once")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  load->add_option("--requests,-n", load_options.requests, "Requests in all")->capture_default_str()->check(CLI::PositiveNumber);
  load->add_flag("--binary", load_options.binary, "Send and ask for tensors as binary data, not JSON");
  load->add_option("--seed", load_options.seed, "Seed for the random inputs")->capture_default_str();
  load->add_flag("--json", load_options.json, "Print the results as JSON");

  QuantizeCliOptions quantize_options;
  CLI::App* quantize = app.add_subcommand("quantize", "Quantize a float model to int8 (QDQ) from calibration samples");
  quantize->footer(kQuantizeFooter);
  quantize->add_option("model", quantize_options.model, "The float .onnx file")->required();
  quantize->add_option("--calibrate", quantize_options.calibrate_dir,
                       "Directory of calibration samples: FILE.npy each (one-input models), or one subdirectory "
                       "per sample holding NAME.npy for every input")
      ->type_name("DIR")
      ->required();
  quantize->add_option("--output,-o", quantize_options.output, "Where to write the quantized model")
      ->type_name("FILE")
      ->required();
  quantize->add_option("--method", quantize_options.method,
                       "minmax: the full range seen; percentile: clip |x| at --percentile (outliers cost the "
                       "other values resolution)")
      ->capture_default_str()
      ->check(CLI::IsMember({"minmax", "percentile"}));
  quantize->add_option("--percentile", quantize_options.percentile, "For --method percentile")
      ->capture_default_str()
      ->check(CLI::Range(50.0, 100.0));
  quantize->add_flag("--per-tensor", quantize_options.per_tensor,
                     "One weight scale per tensor instead of one per output channel");
  quantize->add_option("--threads,-t", quantize_options.threads, "Worker threads for calibration (0: all cores)")
      ->capture_default_str()
      ->check(CLI::Range(0, 4096));

  SimulateOptions sim_options;
  CLI::App* simulate = app.add_subcommand("simulate", "Predict the model's latency on N cores (a simulation over timed tiles)");
  simulate->footer(R"(
For each core count N the model is planned as for N cores, and that plan runs on one thread
with a trace, so each tile is timed alone (--runs times; the median per tile). A discrete-
event simulation then runs the engine's own schedule over those times on N virtual cores:
depth-first following, the ready pool's rows and priority columns, stealing, and for
--schedule barrier the barrier tiles between ops. Memory bandwidth shared by all cores and the
pool's push/pop costs (measured on this machine first) are part of the model; docs/scaling.md
states the assumptions and the measured error.
--validate R also runs the model for real at each simulated core count this machine has (at
1..its cores when --cores names none of them), R runs per schedule interleaved, and prints the
prediction's error next to each measurement.

Examples:
  grove simulate resnet50.onnx
  grove simulate resnet50.onnx --cores 1,2 --validate 20
  grove simulate bert.onnx --shape input_ids=1x128 --cores 1,4,16,64 --bandwidth 0 --json)");
  simulate->add_option("model", sim_options.model, "The .onnx file")->required();
  simulate->add_option("--input,-i", sim_options.inputs, "NAME=FILE.npy (other inputs: seeded random data)")
      ->type_name("NAME=FILE");
  simulate->add_option("--shape", sim_options.shapes, kShapeHelp)->type_name("NAME=DIMS")->allow_extra_args(false);
  simulate->add_option("--cores,-c", sim_options.cores, "Core counts to simulate, comma-separated")
      ->delimiter(',')->capture_default_str()->check(CLI::Range(1, 1024));
  simulate->add_option("--schedule", sim_options.schedule, "aspen, barrier, or both")
      ->capture_default_str()->check(CLI::IsMember({"aspen", "barrier", "both"}));
  simulate->add_option("--tile-counts", sim_options.tile_counts,
                       "Tiles per op when not forced: fixed (about 2 per thread), tail (TA-DNN's staircase), or both")
      ->capture_default_str()->check(CLI::IsMember({"fixed", "tail", "both"}));
  simulate->add_option("--runs,-r", sim_options.runs, "Traced one-thread runs per plan (median per tile)")
      ->capture_default_str()->check(CLI::Range(1, 1000));
  simulate->add_option("--validate", sim_options.validate_runs,
                       "Also measure the simulated core counts this machine has, this many runs per schedule, and print the error")
      ->check(CLI::Range(1, 100000));
  simulate->add_option("--bandwidth", sim_options.bandwidth_gbs,
                       "GB/s all simulated cores share (default: measured here with every core; 0: unlimited)")
      ->check(CLI::Range(0.0, 1e6));
  simulate->add_option("--cross-core", sim_options.cross_ns_per_kb,
                       "ns per KB a tile pays to read output another core wrote (default: measured here; 0: free)")
      ->check(CLI::Range(0.0, 1e6));
  simulate->add_option("--slow-fraction", sim_options.slow_fraction,
                       "Uneven cores: this fraction of the simulated cores (at least one) is slow (0: none)")
      ->check(CLI::Range(0.0, 1.0));
  simulate->add_option("--slow-factor", sim_options.slow_factor, "How many times as long a slow core takes per tile")
      ->capture_default_str()->check(CLI::Range(1.0, 100.0));
  simulate->add_flag("--json", sim_options.json, "Print one JSON object instead of the table");
  simulate->add_option("--seed", sim_options.seed, "Seed for the random inputs")->capture_default_str();
  add_limit_options(simulate, sim_options.limits);

  TailOptions tail_options;
  CLI::App* tail = app.add_subcommand("tail", "Each Conv/MatMul layer's latency over its output-channel count: prune/grow hints");
  tail->footer(R"(
Latency does not fall smoothly with a layer's output channels: it steps with the GEMM's
register tile, the vector width and the tile grid (TA-DNN's staircase). Each Conv (one group),
MatMul and Gemm with constant weights is timed alone, as a one-node model with random weights,
at widths from --span below to --span above its own in steps of --step, on --threads threads
(two sweeps, the better median of --runs runs per width). A layer just past a step is listed
with the width to prune to (latency saved beyond the share of channels removed, at least
--threshold); a layer below a step with the widest width that costs at most a quarter of
--threshold more (free channels). docs/scaling.md has measured staircases.

Examples:
  grove tail resnet50.onnx --threads 2
  grove tail model.onnx --only /layer4/layer4.0/conv2/Conv --span 64 --step 2 --json)");
  tail->add_option("model", tail_options.model, "The .onnx file")->required();
  tail->add_option("--shape", tail_options.shapes, kShapeHelp)->type_name("NAME=DIMS")->allow_extra_args(false);
  tail->add_option("--threads,-t", tail_options.threads, "Worker threads (0: the cores this process may use)")
      ->capture_default_str()->check(CLI::Range(0, 4096));
  tail->add_option("--span", tail_options.span, "Widths this many channels below and above each layer's")
      ->capture_default_str()->check(CLI::Range(1, 4096));
  tail->add_option("--step", tail_options.step, "In steps of this many channels")->capture_default_str()->check(CLI::Range(1, 4096));
  tail->add_option("--runs,-r", tail_options.runs, "Timed runs per width and sweep")->capture_default_str()->check(CLI::Range(1, 1000));
  tail->add_option("--threshold", tail_options.threshold, "Smallest latency saving beyond the channel share to suggest a prune")
      ->capture_default_str()->check(CLI::Range(0.0, 1.0));
  tail->add_option("--only", tail_options.only, "Only the layer with this node name");
  tail->add_flag("--json", tail_options.json, "Print one JSON object (every width's latency) instead of the table");
  tail->add_option("--seed", tail_options.seed, "Seed for the random weights and inputs")->capture_default_str();
  add_limit_options(tail, tail_options.limits);

  TuneOptions tune_options;
  CLI::App* tune = app.add_subcommand("tune", "Measure each Conv's primitive and tile grid on this machine; write a tuning record");
  tune->footer(R"(
Each Conv (2-D, fp32 or bf16) of the model has candidates: its primitive (im2col GEMM; the
direct kernel for a stem; the channels-last GEMM, nhwc, for one group; and where Winograd fits,
F(4x4,3x3) in either layout and F(2x2,3x3) channels-last) times a few tile grids (one, two and
four tiles per thread, cut by rows or by output channels). Rounds of the whole model put one candidate of
every Conv in place and time each node's tiles from a trace (--runs runs per round), after
a round planned by the hand rules; every round is repeated --passes times, in turn. A
candidate replaces the rule where its tiles cost 3% less (their time over the threads plus
the slowest tile). Two sets of choices (every node's best; the best with the rule's tile
count) are then timed against the rules as whole models, interleaved (--verify-runs each),
and the fastest is kept, or none if the rules are fastest. The record goes to the
per-machine cache (~/.cache/grove/tune, or $GROVE_TUNE_DIR), keyed by the model's structure,
this CPU, the thread count and the precision; grove run, bench, plan and serve, and sessions
of the C++ and Python APIs, then plan with it (--tuning off to compare). docs/tuning.md.

Examples:
  grove tune resnet50.onnx --threads 2
  grove tune model.onnx --shape input=1x3x224x224 --dataset profile.csv
  grove tune --sample 300 --threads 1 --dataset profile.csv   (sampled conv layers)
  grove tune --calibrate                                       (the shipped performance model, fitted to this machine)
  grove bench resnet50.onnx --threads 2 --tuning both)");
  tune->add_option("model", tune_options.model, "The .onnx file (not with --fit or --sample)");
  tune->add_option("--fit", tune_options.fit,
                   "Train this machine's performance model on a --dataset CSV instead of tuning a model: MdRAE on a "
                   "held-out tenth against linear regression, then saved where plans without a record use it")
      ->type_name("FILE.csv");
  tune->add_option("--model-out", tune_options.model_out, "--fit: write the model here instead of the per-machine cache")
      ->type_name("FILE");
  tune->add_option("--transfer-from", tune_options.transfer_from,
                   "--fit: fine-tune this (another machine's) model on --sample-share of the samples, against training "
                   "from scratch on them")->type_name("FILE");
  tune->add_option("--fit-machine", tune_options.fit_machine,
                   "--fit: the rows of this machine key (another CPU's profile, for a study) instead of this "
                   "machine's; needs --model-out")->type_name("KEY");
  tune->add_option("--fit-report", tune_options.fit_report, "--fit: write the test split's measured and predicted times here")
      ->type_name("FILE.csv");
  tune->add_option("--sample-share", tune_options.sample_share, "--fit --transfer-from: share of the training samples used")
      ->capture_default_str()->check(CLI::Range(0.001, 1.0));
  tune->add_option("--input,-i", tune_options.inputs, "Input from a .npy file: NAME=FILE.npy; others get seeded random data")
      ->type_name("NAME=FILE")->allow_extra_args(false);
  tune->add_option("--shape", tune_options.shapes, kShapeHelp)->type_name("NAME=DIMS")->allow_extra_args(false);
  tune->add_option("--threads,-t", tune_options.threads, "Worker threads to tune for (0: the cores this process may use)")
      ->capture_default_str()->check(CLI::Range(0, 4096));
  tune->add_option("--precision", tune_options.precision, kPrecisionHelp)
      ->capture_default_str()->check(CLI::IsMember({"fp32", "bf16", "int8"}));
  tune->add_option("--runs,-r", tune_options.runs, "Traced runs per round (each conv's median)")
      ->capture_default_str()->check(CLI::Range(1, 1000));
  tune->add_option("--passes", tune_options.passes, "Times every round is repeated, in turn (medians over all their runs)")
      ->capture_default_str()->check(CLI::Range(1, 100));
  tune->add_option("--verify-runs", tune_options.verify_runs, "Whole-model runs of the rules and of the choices, interleaved")
      ->capture_default_str()->check(CLI::Range(1, 10000));
  tune->add_option("--output,-o", tune_options.output, "Write the record here instead of the per-machine cache")->type_name("FILE");
  tune->add_option("--dataset", tune_options.dataset,
                   "Append every measured candidate (layer configuration, primitive, grid, time) to this CSV")
      ->type_name("FILE.csv");
  tune->add_option("--sample", tune_options.sample,
                   "Instead of a model, profile N conv layers sampled from the sizes CNNs use (channels 8-768, planes "
                   "7-112, kernels 1/3/5/7, strides 1/2; every eighth a stem: 1-4 channels on a 56-416 plane), "
                   "each as a one-conv model, into --dataset")
      ->type_name("N")->check(CLI::Range(1, 100000));
  tune->add_flag("--sample-stems", tune_options.sample_stems,
                 "--sample: stems only (a network's first conv, where the direct kernel competes)");
  tune->add_flag("--calibrate", tune_options.calibrate,
                 "Move the performance model shipped for this ISA (or --transfer-from's) to this machine: profile "
                 "--sample sampled conv layers (default 25) at 1 thread and at --threads, fine-tune the model on them, "
                 "report its MdRAE against the shipped model as is and against one trained from scratch, and install "
                 "it where plans without a tuning record use it (a few minutes)");
  tune->add_flag("--quiet,-q", tune_options.quiet, "No progress lines on stderr");
  tune->add_option("--seed", tune_options.seed, "Seed for the random inputs")->capture_default_str();
  add_limit_options(tune, tune_options.limits);

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

#pragma once
// The `grove` subcommands. Each returns the process exit code and throws grove::Error for
// bad input; main() turns that into "grove: error: <message>" and exit code 1.
#include <cstdint>
#include <cstdio>
#include <string>
#include <vector>

#include "passes/bind.h"
#include "graph/limits.h"
#include "grove/layout.h"
#include "grove/precision.h"
#include "runtime/engine.h"

namespace CLI {
class App;
}

namespace grove::cli {

struct InfoOptions {
  std::string model;
  std::vector<std::string> shapes;  // NAME=DIMS
  Limits limits;                    // --max-memory, --max-nodes, --max-tiles
};

struct RunOptions {
  std::vector<std::string> models;  // several: they co-execute in one engine
  std::vector<std::string> inputs;  // NAME=FILE.npy, or FILE.npy for a single-input model
  std::vector<std::string> shapes;  // NAME=DIMS
  std::string output_dir;           // empty: write no files
  int threads = 0;                  // 0: the cores this process may use
  std::string executor = "tiles";   // tiles | reference
  std::string schedule = "aspen";   // aspen | barrier
  int tiles_per_op = 0;             // 0: by rule
  std::string precision = "fp32";   // fp32 | bf16
  std::string tuning = "auto";      // SessionOptions::tuning: auto | off | a record file
  std::string layout = "nhwc";      // SessionOptions::conv_layout: nhwc | nchw
  std::string trace_path;           // empty: no trace
  std::string subnet;               // non-empty: run this sub-net (cli/subnets.h)
  std::string prune;                // SessionOptions::feature_pruning ("": the model's metadata)
  uint64_t seed = 0;
  Limits limits;                    // --max-memory, --max-nodes, --max-tiles
};

struct CheckOptions {
  std::string model;
  std::vector<std::string> inputs;  // NAME=FILE.npy, or FILE.npy for a single-input model
  std::vector<std::string> shapes;  // NAME=DIMS
  int threads = 0;                  // 0: the cores this process may use
  std::string schedule = "aspen";
  std::string precision = "fp32";
  std::string tuning = "auto";
  std::string layout = "nhwc";
  double tolerance = 1e-4;          // of each output's largest magnitude
  uint64_t seed = 0;
  Limits limits;
};

struct PlanCliOptions {
  std::string model;
  std::vector<std::string> shapes;  // NAME=DIMS
  int threads = 0;                  // 0: the cores this process may use
  int tiles_per_op = 0;             // 0: by rule
  int64_t min_tile_flops = 0;       // 0: by rule
  std::string schedule = "aspen";
  std::string precision = "fp32";   // fp32 | bf16
  std::string tile_counts = "tail";  // fixed | tail
  std::string tuning = "auto";      // auto | off | a record file (docs/tuning.md)
  std::string layout = "nhwc";      // PlanOptions::conv_layout: nhwc | nchw
  std::string prune;                // "" (the model's grove.antidote), "off", or statements
  bool totals_only = false;
  bool json = false;                // one JSON object: options, machine probes, per-node decisions
  std::string save_path;            // non-empty: write the TileGraph here
  std::string load_path;            // non-empty: load a TileGraph and check it against a fresh plan
  Limits limits;                    // --max-memory, --max-nodes, --max-tiles
};

struct BenchOptions {
  std::vector<std::string> models;  // several: co-execution, together vs one after the other
  std::vector<std::string> inputs;  // NAME=FILE.npy; the others get seeded random data
  std::vector<std::string> shapes;  // NAME=DIMS
  int threads = 0;                  // 0: the cores this process may use
  int runs = 10;
  double seconds = 0;               // > 0: run until this much time has passed (at least `runs`)
  int warmup = 2;
  double warmup_seconds = 0;  // and keep warming up until this many seconds have passed
  std::string schedule = "aspen";   // aspen | barrier | both (interleaved A B A B ...)
  int tiles_per_op = 0;
  std::string tile_counts = "tail";  // fixed | tail | both (interleaved, like --schedule both)
  std::string precision = "fp32";   // fp32 | bf16 | int8 | both (fp32,bf16) | a comma list, interleaved
  std::string calibrate_dir;        // --precision int8: calibration samples (else the bench inputs)
  std::string tuning = "auto";      // auto | off | both (untuned and tuned, interleaved) | a record file
  std::string layout = "nhwc";      // nchw | nhwc | both (interleaved): SessionOptions::conv_layout
  int check = 0;                    // > 0: compare bf16/int8 with fp32 outputs over this many input sets
  // Feature-map pruning: "" the model's metadata, "off", "both" (interleaved, unpruned vs the
  // model's), or statements (docs/dynamic.md).
  std::string prune;
  bool json = false;
  uint64_t seed = 0;
  std::string trace_path;           // empty: no trace; else trace_runs more runs, traced, after the timed ones
  int trace_runs = 1;               // runs traced per schedule (or sub-net), interleaved as the timed runs
  std::string pieces = "on";        // SessionOptions::tile_pieces: on, off, or both (interleaved)
  std::string run_alone = "auto";   // SessionOptions::run_alone: auto, on or off
  double slow_worker = 1;           // EngineDebugOptions::slow_worker: worker 0 this many times slower (uneven cores)
  std::string workers_schedule;     // "1:2s,2:2s,1:2s": elastic workers, throughput per phase
  // Dynamic models (docs/dynamic.md): time these sub-nets (cli/subnets.h), or run under a
  // latency target with the controller, against a co-running load of other models.
  std::string subnet;
  double latency_target_ms = 0;
  std::string co_run;               // the load: this model, in as many streams as the phase says
  std::string co_run_schedule = "0:3s,1:3s,0:3s";  // STREAMS:SECONDS phases
  bool urgent = false;              // SessionOptions::urgent for the timed dynamic model
  Limits limits;                    // --max-memory, --max-nodes, --max-tiles
  // Several models, --mt-graph: search MT-Graph stage pointers (docs/serving.md).
  bool mt_graph = false;
  int mt_pointers = 2, mt_rounds = 2, mt_candidates = 6;
  int mt_profile_runs = 5;          // runs per profiled candidate (median)
};

struct SimulateOptions {
  std::string model;
  std::vector<std::string> inputs;  // NAME=FILE.npy; the others get seeded random data
  std::vector<std::string> shapes;  // NAME=DIMS
  std::vector<int> cores = {1, 2, 4, 8, 16, 32, 64};
  std::string schedule = "both";    // aspen | barrier | both
  std::string tile_counts = "tail";  // fixed | tail | both (TileCounts)
  int runs = 5;                     // traced one-thread runs per plan; each tile's median
  int validate_runs = 0;            // > 0: also measure 1..this machine's cores, this many runs per schedule
  double bandwidth_gbs = -1;        // shared by all simulated cores; < 0: measured here with all cores; 0: unlimited
  double cross_ns_per_kb = -1;      // reading another core's output; < 0: measured here; 0: free
  double slow_fraction = 0;         // this fraction of the simulated cores (rounded, at least one when > 0) is slow
  double slow_factor = 2;           // by this factor
  bool json = false;
  uint64_t seed = 0;
  Limits limits;                    // --max-memory, --max-nodes, --max-tiles
};

struct TailOptions {
  std::string model;
  std::vector<std::string> shapes;  // NAME=DIMS
  int threads = 0;                  // 0: the cores this process may use
  int64_t span = 32;                // widths from channels - span to channels + span
  int64_t step = 4;                 // in steps of this many channels
  int runs = 7;                     // timed runs per width and sweep (two sweeps; the better median)
  double threshold = 0.05;          // prune when the latency saved exceeds the channels removed by this share
  std::string only;                 // one layer by node name
  bool json = false;
  uint64_t seed = 0;
  Limits limits;
  std::string apply;                // --apply OUT.onnx: write the model with the suggested widths
  std::string apply_mode;           // grow | prune | both; empty: grow, or both for --widths
  std::vector<std::string> widths;  // --widths NAME=C: these widths instead of measured ones
};

// One phase of --workers-schedule.
struct WorkerPhase {
  int workers = 1;
  double seconds = 1;
};
std::vector<WorkerPhase> parse_workers_schedule(const std::string& text);  // Error naming a bad item
// COUNT:SECONDS,... with counts from min_count; errors name `option`.
std::vector<WorkerPhase> parse_phases(const std::string& text, const std::string& option, int min_count);

struct ServeOptions {
  std::vector<std::string> models;  // NAME=PATH.onnx
  std::string model_repository;     // a directory: every model in it is loaded at start
  std::string host = "127.0.0.1";
  int port = 8000;                  // 0: any free port (printed)
  int grpc_port = -1;               // the KServe v2 gRPC front end; -1: off, 0: any free port (printed)
  int threads = 0;                  // engine workers; 0: the cores this process may use
  int http_threads = 0;             // 0: as many as max_concurrent, so a slow client never waits for a thread
  int max_concurrent = 256;
  int64_t max_body_bytes = int64_t{64} << 20;
  double request_timeout_s = 60;
  int64_t max_serve_memory = 0;     // bytes the runs in flight may reserve together; 0: 3/4 of physical memory
  int max_batch = 0;                // dynamic batching: most rows per joined run; 0: off
  double batch_delay_ms = 2;        // how long a first request waits for company
  std::string precision = "fp32";   // fp32 | bf16, for every served model
  std::string tuning = "auto";      // auto | off: tuning records (docs/tuning.md)
  double calibrate_when_idle_s = 10;  // background calibration after this long without a request; 0: never
  double mt_graph_window_ms = 1.0;  // MT-Graph pairs: how long a request waits for another model's; 0: off
  std::string layout = "nhwc";      // nhwc | nchw: SessionOptions::conv_layout of every served model
  Limits limits;                    // --max-memory, --max-nodes, --max-tiles
};

struct QuantizeCliOptions {
  std::string model;
  std::string calibrate_dir;        // .npy samples (see cmd_quantize.cpp)
  std::string output;
  std::string method = "minmax";    // minmax | percentile
  double percentile = 99.999;
  bool per_tensor = false;
  int threads = 0;
};

struct GenerateCliOptions {
  std::string model;
  std::string prompt_ids;           // comma-separated token ids
  int max_new_tokens = 16;
  double temperature = 0;           // 0: greedy
  int top_k = 0;
  double top_p = 1.0;
  uint64_t seed = 0;
  int64_t eos = -1;                 // -1: no end token
  int64_t min_capacity = 64;        // GenerateOptions::min_capacity
  int warmup = 0;                   // untimed generations before the timed one
  int threads = 0;
  int tiles_per_op = 0;             // 0: by rule
  bool pieces = true;               // SessionOptions::tile_pieces
  std::string schedule = "aspen";
  std::string precision = "fp32";
  std::string tuning = "auto";
  bool json = false;
  std::string trace_path;           // one more generation, traced to this file
  Limits limits;
};

struct TuneOptions {
  std::string model;
  std::vector<std::string> inputs;  // NAME=FILE.npy; the others get seeded random data
  std::vector<std::string> shapes;  // NAME=DIMS
  int threads = 0;                  // 0: the cores this process may use
  std::string precision = "fp32";   // fp32 | bf16
  int runs = 10;                    // traced runs per round
  int passes = 2;                   // every round repeated this many times, in turn
  int verify_runs = 20;             // whole-model runs of each of rules and tuned, interleaved
  std::string output;               // the record file; empty: the per-machine cache
  std::string dataset;              // non-empty: append every measured candidate to this CSV
  int sample = 0;                   // > 0: profile this many sampled conv layers into the dataset instead
  bool sample_stems = false;        // --sample: only stems (few input channels, on an image)
  int sample_layouts = 0;           // > 0: profile the layout changes of this many sampled values into the dataset
  std::string fit_layouts;          // non-empty: train the layout model on this CSV
  std::string fit;                  // non-empty: train the performance model on this CSV instead
  std::string model_out;            // the model file; empty: the per-machine cache
  std::string transfer_from;        // --fit: fine-tune this model on sample_share of the samples
  std::string transfer_text;        // non-empty: that model's text (a shipped one), transfer_from its name
  bool calibrate = false;           // --calibrate: sample this machine and fine-tune the shipped model
  double sample_share = 0.05;
  std::string fit_report;           // --fit: the test split's predicted and measured times, CSV
  std::string fit_machine;          // --fit: that machine key's rows instead of this machine's
  bool quiet = false;               // no progress lines
  uint64_t seed = 0;
  Limits limits;
};

struct LoadOptions {
  std::string url = "http://127.0.0.1:8000";
  std::string model;
  int concurrency = 8;
  int requests = 200;
  bool binary = false;  // the binary tensor data extension instead of JSON
  uint64_t seed = 0;
  bool json = false;
};

// Stops the engine's trace, writes it to `path` and says where it went on `say`.
void write_trace(Engine& engine, const std::string& path, std::FILE* say = stdout);

int run_info(const InfoOptions& options);
int run_bench(const BenchOptions& options);
int run_bench_coexec(const BenchOptions& options);
int run_bench_elastic(const BenchOptions& options);
int run_bench_dynamic(const BenchOptions& options);  // --subnet, --latency-target-ms  // --workers-schedule  // several models: submitted together vs in turn
int run_bench_mtgraph(const BenchOptions& options);  // several models, --mt-graph: staged schedules
int run_plan(const PlanCliOptions& options);
int run_run(const RunOptions& options);
int run_demo();
int run_check(const CheckOptions& options);  // 0: agree, 3: a mismatch (named)
int run_simulate(const SimulateOptions& options);
int run_tail(const TailOptions& options);
int run_generate(const GenerateCliOptions& options);
int run_tune(const TuneOptions& options);
int run_tune_fit(const TuneOptions& options);  // --fit
int run_tune_sample(const TuneOptions& options);  // --sample
int run_tune_calibrate(const TuneOptions& options);  // --calibrate
int run_tune_sample_layouts(const TuneOptions& options);  // --sample-layouts
int run_tune_fit_layouts(const TuneOptions& options);  // --fit-layouts
int run_serve(const ServeOptions& options);
int run_load(const LoadOptions& options);
int run_quantize(const QuantizeCliOptions& options);

// Each subcommand's options, declared on `app` into `o` (in its cmd_*.cpp, from cli/options.h).
CLI::App* add_info_command(CLI::App& app, InfoOptions& o);
CLI::App* add_run_command(CLI::App& app, RunOptions& o);
CLI::App* add_check_command(CLI::App& app, CheckOptions& o);
CLI::App* add_plan_command(CLI::App& app, PlanCliOptions& o);
CLI::App* add_bench_command(CLI::App& app, BenchOptions& o);
CLI::App* add_serve_command(CLI::App& app, ServeOptions& o);
CLI::App* add_load_command(CLI::App& app, LoadOptions& o);
CLI::App* add_quantize_command(CLI::App& app, QuantizeCliOptions& o);
CLI::App* add_simulate_command(CLI::App& app, SimulateOptions& o);
CLI::App* add_tail_command(CLI::App& app, TailOptions& o);
CLI::App* add_generate_command(CLI::App& app, GenerateCliOptions& o);
CLI::App* add_tune_command(CLI::App& app, TuneOptions& o);

// "fp32" or "bf16" (the CLI checks the spelling) as the API's Precision.
Precision parse_precision(const std::string& text);
// "nhwc" or "nchw" as the API's ConvLayout.
ConvLayout parse_layout(const std::string& text);
// --prune TEXT as SessionOptions::feature_pruning: ';' separates statements on a command line.
std::string feature_pruning_option(const std::string& text);

// Parses repeated --shape NAME=DIMS options; a name given twice is an Error.
ShapeMap parse_shape_options(const std::vector<std::string>& texts);

}  // namespace grove::cli

// grove serve: the KServe v2 inference server (src/serve) for one or more models on one Engine.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <memory>
#include <thread>

#include "cli/commands.h"
#include "cli/options.h"
#include "grove/background_calibration.h"
#include "graph/error.h"
#include "kernels/gemm.h"
#include "grpc_serve/grpc_server.h"
#include "serve/http_listener.h"
#include "serve/inference_server.h"
#include "serve/model_repository.h"

namespace grove::cli {
namespace {

// SIGTERM and SIGINT are blocked in every thread and taken by one watcher with sigwait, so
// the shutdown runs as ordinary code, not inside a signal handler.
sigset_t shutdown_signals() {
  sigset_t set;
  sigemptyset(&set);
  sigaddset(&set, SIGTERM);
  sigaddset(&set, SIGINT);
  return set;
}

}  // namespace

int run_serve(const ServeOptions& o) {
  if (o.models.empty() && o.model_repository.empty())
    throw Error("grove serve: give --model NAME=PATH.onnx (repeatable) or --model-repository DIR");
  // Block before any thread starts, so that every thread inherits the mask.
  sigset_t signals = shutdown_signals();
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  Engine engine({.threads = o.threads});
  serve::ModelRepository models(engine, o.limits, o.model_repository,
                                {.max_batch = o.max_batch,
                                 .max_delay = std::chrono::microseconds(static_cast<int64_t>(o.batch_delay_ms * 1000))},
                                {.precision = parse_precision(o.precision), .conv_layout = parse_layout(o.layout), .tuning = o.tuning});
  for (const std::string& spec : o.models) {
    size_t eq = spec.find('=');
    if (eq == std::string::npos || eq == 0 || eq + 1 == spec.size())
      throw Error("grove serve: --model wants NAME=PATH.onnx, got '" + spec + "'");
    try {
      models.load(spec.substr(0, eq), spec.substr(eq + 1));
    } catch (const serve::HttpError& e) {
      throw Error(std::string("grove serve: model '") + spec.substr(0, eq) + "': " + e.what());
    }
  }
  for (const std::string& name : models.directory_models()) {
    try {
      models.load(name);
    } catch (const serve::HttpError& e) {
      std::fprintf(stderr, "grove serve: model '%s' not loaded: %s\n", name.c_str(), e.what());
    }
  }

  // On a machine without a performance model of its own, plans come from the one shipped for
  // its ISA; the server moves that model to this machine while it has nothing else to do.
  std::unique_ptr<BackgroundCalibration> calibration;
  if (o.calibrate_when_idle_s > 0 && o.tuning != "off")
    calibration = std::make_unique<BackgroundCalibration>(engine, BackgroundCalibrationOptions{.idle_seconds = o.calibrate_when_idle_s});
  serve::InferenceServer server(engine, models,
                                {.max_body_bytes = o.max_body_bytes, .max_concurrent = o.max_concurrent,
                                 .request_timeout_s = o.request_timeout_s, .max_serve_memory = o.max_serve_memory,
                                 .mt_graph_window_ms = o.mt_graph_window_ms, .calibration = calibration.get()});
  // --max-concurrent also bounds the connections held waiting for an HTTP thread: past it a
  // client is answered 503 at once rather than queued without limit. By default every held
  // connection has a thread: a thread waiting on a slow or idle client costs a stack, while
  // with 64 threads, 64 clients sending a byte a second stall every other
  // client for the 5 s header timeout (tests/serve/abuse_test.py, scenario d).
  const int http_threads = o.http_threads > 0 ? o.http_threads : o.max_concurrent;
  serve::HttpListener listener(server, {.host = o.host, .port = o.port, .http_threads = http_threads, .max_held = o.max_concurrent},
                               o.max_body_bytes);
  int port = listener.bind();
  std::unique_ptr<grpc_serve::GrpcServer> grpc;
  if (o.grpc_port >= 0)
    grpc = std::make_unique<grpc_serve::GrpcServer>(
        server, grpc_serve::GrpcOptions{.host = o.host, .port = o.grpc_port, .max_message_bytes = o.max_body_bytes,
                                        .max_threads = o.max_concurrent});

  std::atomic<bool> exiting{false};
  std::thread watcher([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    if (exiting.load()) return;  // woken by the exit path below
    std::fprintf(stderr, "grove serve: %s, finishing %lld requests in flight\n", sig == SIGTERM ? "SIGTERM" : "SIGINT",
                 static_cast<long long>(server.in_flight()));
    server.start_draining();
    listener.stop();
    if (grpc) grpc->stop();  // refuses new calls, answers those in flight (503 -> UNAVAILABLE while draining)
  });

  for (const auto& m : models.loaded()) {
    std::string batching = m->batcher ? ", dynamic batching up to " + std::to_string(o.max_batch) + " rows"
                           : m->batching_note.empty() ? "" : ", not batched: " + m->batching_note;
    std::printf("grove serve: model '%s' ready (%s%s)\n", m->name.c_str(), m->path.c_str(), batching.c_str());
  }
  if (o.precision == "bf16")
    std::printf("grove serve: precision bf16%s\n",
                kernels::precision_supported(kernels::Precision::bf16, kernels::active_isa())
                    ? (kernels::precision_supported(kernels::Precision::bf16_amx, kernels::active_isa())
                           ? ": Conv/MatMul/Gemm products with constant weights in bfloat16, on AMX tiles"
                           : ": Conv/MatMul/Gemm products with constant weights in bfloat16")
                    : " asked for, but this CPU (or GROVE_ISA) has no AVX512-BF16: running fp32");
  std::printf("grove serve: memory budget %.3g GB for the runs in flight (--max-serve-memory)\n",
              static_cast<double>(server.memory_budget().capacity()) * 1e-9);
  std::printf("grove serve: listening on http://%s:%d (%d engine threads, KServe v2: /v2/models/NAME/infer, /metrics)\n",
              o.host.c_str(), port, engine.threads());
  if (grpc)
    std::printf("grove serve: gRPC on %s:%d (KServe v2 GRPCInferenceService, raw tensor contents)\n", o.host.c_str(),
                grpc->port());
  std::fflush(stdout);
  listener.listen();
  // listen() returns after stop(): the HTTP pool has answered every accepted request.
  exiting.store(true);
  pthread_kill(watcher.native_handle(), SIGTERM);  // wakes the watcher if no signal came
  watcher.join();
  std::printf("grove serve: stopped\n");
  return 0;
}

constexpr const char* kServeCommandFooter = R"(
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
                                              per model; engine tiles, busy time, jobs in flight;
                                              the background calibration's state
  GET  /v2/mtgraph                            MT-Graph: the pairs of models run together, the stage
                                              schedule in force for each and its measured gain
  GET  /                                      a live page: models, rates, latencies, tiles per core
With --grpc-port: the same protocol over gRPC (inference.GRPCInferenceService: ServerLive,
ServerReady, ModelReady, ServerMetadata, ModelMetadata, ModelInfer with raw_input_contents or
typed contents, RepositoryIndex, RepositoryModelLoad/Unload); errors are gRPC status codes
(INVALID_ARGUMENT, NOT_FOUND, RESOURCE_EXHAUSTED, UNAVAILABLE, DEADLINE_EXCEEDED, INTERNAL) with
the same messages.
Every model runs on the one engine: each request is a job in the same ready pool, so requests
of all models share the cores tile by tile. Errors are JSON {"error": "..."}: 404 unknown model,
400 bad request (name, shape, datatype, JSON, JSON nested over 64 levels), 408 request not
received in time (headers 5 s, body 30 s), 413 body too large, 415 compressed or multipart
body, 431 headers over 64 KiB, 503 busy, over the memory budget (--max-serve-memory) or shutting
down, 504 timeout, 500 a failing
inference (naming the node and op). SIGTERM or SIGINT: stop
accepting, finish the requests in flight, exit 0.

Examples:
  grove serve --model resnet=resnet50.onnx --model bert=bert.onnx --port 8000
  curl localhost:8000/v2/models/resnet
  curl -d '{"inputs":[{"name":"x","shape":[1,4],"datatype":"FP32","data":[1,2,3,4]}]}'        localhost:8000/v2/models/tiny/infer
  grove load http://127.0.0.1:8000 --model resnet -c 8 -n 500
)";


CLI::App* add_serve_command(CLI::App& app, ServeOptions& o) {
  CLI::App* cmd = app.add_subcommand("serve", "Serve models over HTTP: the KServe v2 inference protocol and /metrics");
  cmd->footer(kServeCommandFooter);
  cmd->add_option("--model", o.models, "A model to serve, as NAME=PATH.onnx; repeat for more")
      ->type_name("NAME=PATH");
  cmd->add_option("--model-repository", o.model_repository,
                    "A directory of models (NAME.onnx, NAME/model.onnx or NAME/1/model.onnx): all are loaded at start, "
                    "and the repository API loads and unloads them by name")
      ->type_name("DIR");
  cmd->add_option("--host", o.host, "Address to listen on")->capture_default_str();
  cmd->add_option("--port", o.port, "Port to listen on (0: any free port, printed at start)")
      ->capture_default_str()
      ->check(CLI::Range(0, 65535));
  cmd->add_option("--grpc-port", o.grpc_port,
                    "Also serve the KServe v2 protocol over gRPC (GRPCInferenceService) on this port, with the "
                    "same limits and errors as REST (-1: off; 0: any free port, printed at start)")
      ->capture_default_str()
      ->check(CLI::Range(-1, 65535));
  cmd->add_option("--threads", o.threads, "Engine workers shared by every model (0: one per available core)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--http-threads", o.http_threads,
                    "Connections served at once (each keep-alive client holds one while connected; "
                    "0: as many as --max-concurrent)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-concurrent", o.max_concurrent,
                    "Inferences in flight at once, and connections held (served or waiting for an HTTP thread); "
                    "more get 503")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-body-bytes", o.max_body_bytes, "Largest request body; larger get 413")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--request-timeout", o.request_timeout_s,
                    "Seconds an inference may take: past it, its run is stopped and the client gets 504")
      ->capture_default_str()
      ->check(CLI::PositiveNumber);
  cmd->add_option("--max-serve-memory", o.max_serve_memory,
                    "Bytes the inferences in flight may reserve together: each reserves what its plan allocates "
                    "(or, for a model with control flow or value-dependent shapes, its --max-memory) before it runs "
                    "and gives it back when its run stops; one that finds too little left waits up to 1 s "
                    "(within --request-timeout), then gets 503 (0: three quarters of the physical memory)")
      ->type_name("BYTES")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--max-batch", o.max_batch,
                    "Dynamic batching: join requests that arrive together into runs of up to this many rows "
                    "(dimension 0), for models whose inputs and outputs all have a free first dimension (0: off)")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--batch-delay-ms", o.batch_delay_ms,
                    "Dynamic batching: how long a request may wait for others to join its batch")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  cmd->add_option("--tuning", o.tuning, kTuningHelp)->capture_default_str()->check(CLI::IsMember({"auto", "off"}));
  cmd->add_option("--mt-graph-window-ms", o.mt_graph_window_ms,
                  "With several models: how long a request waits for a request of another model to run with it as "
                  "one MT-Graph compound task, whose stage schedule the server searches on live pairs and keeps "
                  "only where it beats plain co-execution (GET /v2/mtgraph; docs/serving.md). 0: every request runs alone")
      ->capture_default_str()
      ->check(CLI::Range(0.0, 1000.0));
  cmd->add_option("--calibrate-when-idle", o.calibrate_when_idle_s,
                  "Seconds without a request after which the server calibrates the shipped performance model to this "
                  "machine, a sampled conv layer at a time at idle priority, giving a layer up when a request arrives "
                  "(about a minute of idle cores in all; once per machine; docs/tuning.md). 0: never")
      ->capture_default_str()
      ->check(CLI::NonNegativeNumber);
  add_layout_option(cmd, o.layout);
  add_precision_option(cmd, o.precision, {"fp32", "bf16", "int8"});
  add_limit_options(cmd, o.limits);
  return cmd;
}

}  // namespace grove::cli

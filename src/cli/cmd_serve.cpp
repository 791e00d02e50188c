// grove serve: the KServe v2 inference server (src/serve) for one or more models on one Engine.
#include <atomic>
#include <csignal>
#include <cstdio>
#include <thread>

#include "cli/commands.h"
#include "graph/error.h"
#include "kernels/gemm.h"
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

  serve::InferenceServer server(engine, models,
                                {.max_body_bytes = o.max_body_bytes, .max_concurrent = o.max_concurrent,
                                 .request_timeout_s = o.request_timeout_s});
  // --max-concurrent also bounds the connections held waiting for an HTTP thread: past it a
  // client is answered 503 at once rather than queued without limit. By default every held
  // connection has a thread: a thread waiting on a slow or idle client costs a stack, while
  // with 64 threads, 64 clients sending a byte a second stall every other
  // client for the 5 s header timeout (tests/serve/abuse_test.py, scenario d).
  const int http_threads = o.http_threads > 0 ? o.http_threads : o.max_concurrent;
  serve::HttpListener listener(server, {.host = o.host, .port = o.port, .http_threads = http_threads, .max_held = o.max_concurrent},
                               o.max_body_bytes);
  int port = listener.bind();

  std::atomic<bool> exiting{false};
  std::thread watcher([&] {
    int sig = 0;
    sigwait(&signals, &sig);
    if (exiting.load()) return;  // woken by the exit path below
    std::fprintf(stderr, "grove serve: %s, finishing %lld requests in flight\n", sig == SIGTERM ? "SIGTERM" : "SIGINT",
                 static_cast<long long>(server.in_flight()));
    server.start_draining();
    listener.stop();
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
  std::printf("grove serve: listening on http://%s:%d (%d engine threads, KServe v2: /v2/models/NAME/infer, /metrics)\n",
              o.host.c_str(), port, engine.threads());
  std::fflush(stdout);
  listener.listen();
  // listen() returns after stop(): the HTTP pool has answered every accepted request.
  exiting.store(true);
  pthread_kill(watcher.native_handle(), SIGTERM);  // wakes the watcher if no signal came
  watcher.join();
  std::printf("grove serve: stopped\n");
  return 0;
}

}  // namespace grove::cli

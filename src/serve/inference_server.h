#pragma once
// The Open Inference Protocol v2 (KServe, Triton) over grove: health, server and model
// metadata, inference with JSON tensors and the binary tensor data extension, the model
// repository extension, and Prometheus /metrics. handle() is the whole server without
// sockets; http_listener.h puts it behind cpp-httplib.
#include <atomic>
#include <cstdint>
#include <memory>
#include <mutex>
#include <string>

#include "grove/background_calibration.h"
#include "serve/http_types.h"
#include "serve/memory_budget.h"
#include "serve/model_repository.h"
#include "serve/mt_graph_pairs.h"

namespace grove::serve {

struct ServerOptions {
  int64_t max_body_bytes = int64_t{64} << 20;  // larger requests get 413
  int max_concurrent = 256;                    // inferences in flight; more get 503
  double request_timeout_s = 60;               // an inference not done by then gets 504
  // Deepest nesting of arrays and objects in a request's JSON; deeper gets 400 before parsing.
  // A tensor's nested `data` needs its rank plus 3 (the body, `inputs`, the input).
  int max_json_depth = 64;
  // Bytes the runs in flight may reserve together (--max-serve-memory): each inference
  // reserves its estimate (run_memory_estimate) before it runs and gives it back when its run
  // has stopped. 0: default_serve_memory().
  int64_t max_serve_memory = 0;
  // How long a request waits for reserved bytes to be given back before it gets 503 (and never
  // past its --request-timeout).
  double memory_wait_s = 1.0;
  // How long a request waits for a request of another model to run with as one MT-Graph
  // compound task (mt_graph_pairs.h); 0: never.
  double mt_graph_window_ms = 1.0;
  // The background calibration of the performance model (cmd_serve), for /metrics; null: none.
  const BackgroundCalibration* calibration = nullptr;
};

// The default server memory budget: three quarters of the physical memory (so half of it,
// Limits' default for one run, leaves room beside it for planned runs), 12 GiB if unknown.
int64_t default_serve_memory();

class InferenceServer {
 public:
  InferenceServer(Engine& engine, ModelRepository& models, ServerOptions options = {});

  // Any request: never throws; errors become 4xx/5xx with {"error": "..."}.
  HttpResponse handle(const HttpRequest& request);

  // Graceful shutdown, first step: /v2/health/ready turns 503 and new inferences are refused
  // with 503, while those in flight finish.
  void start_draining() { draining_.store(true); }
  int64_t in_flight() const { return in_flight_.load(); }
  const MemoryBudget& memory_budget() const { return memory_; }

 private:
  HttpResponse route(const HttpRequest& request);
  HttpResponse infer(ServedModel& model, const HttpRequest& request);
  // POST .../generate and .../generate_stream (generate_endpoint.cpp): token-by-token
  // generation with a decoder, in one reply or as Server-Sent Events.
  struct Generation;
  std::shared_ptr<Generation> start_generation(ServedModel& model, const HttpRequest& request);
  HttpResponse generate(ServedModel& model, const HttpRequest& request);
  HttpResponse generate_stream(ServedModel& model, const HttpRequest& request);
  TensorMap run_subnet(ServedModel& model, const TensorMap& inputs, int subnet, double target_ms, int& chosen,
                       const CancelToken& cancel);
  // The 504's message: the model and --request-timeout, then `what_then`.
  std::string timed_out_message(const ServedModel& model, const char* what_then = "; it was stopped") const;
  // What a request gets for an Error from planning its input shapes: 504 past its deadline,
  // 400 for shapes the model cannot take.
  HttpError planning_error(const ServedModel& model, const Error& e) const;
  HttpResponse model_metadata(const ServedModel& model) const;
  HttpResponse metrics() const;
  HttpResponse mt_graph_schedules() const;  // GET /v2/mtgraph

  // A request's place among --max-concurrent (503 when none is left) and its metrics: taken on
  // construction, given back and counted on destruction, as ok only once succeeded() was called.
  class InFlight {
   public:
    InFlight(InferenceServer& server, ServedModel& model);
    ~InFlight();
    InFlight(const InFlight&) = delete;
    InFlight& operator=(const InFlight&) = delete;
    void succeeded() { ok_ = true; }

   private:
    InferenceServer& server_;
    ServedModel& model_;
    std::chrono::steady_clock::time_point start_;
    bool ok_ = false;
  };

  Engine& engine_;
  ModelRepository& models_;
  ServerOptions options_;
  std::atomic<bool> draining_{false};
  std::atomic<int64_t> in_flight_{0};
  MemoryBudget memory_;
  MtGraphPairs mt_graph_;
  // GET /v2/timeline, for the live page: a window of the engine's tiles, the last few runs'.
  static constexpr double kTimelineWindowSeconds = 0.3;
  static constexpr int kTimelineJobs = 6;
  std::mutex timeline_mutex_;
};

// The bytes one run of `model` on `inputs` reserves from the server's memory budget: every
// value its plan for these input shapes allocates (inputs, activations and outputs, as if
// none shared a buffer: an upper bound on the run's peak), or, for a model whose shapes only
// its run decides (control flow, value-dependent shapes: no plan ahead), its per-run memory
// limit (--max-memory), which its run is charged against. Plans the shapes when they are new,
// as the run would, waiting for that until `cancel` stops (then an Error of kind `cancelled`;
// plan_for in runtime/session.h); Error for inputs the model cannot bind.
int64_t run_memory_estimate(ServedModel& model, const TensorMap& inputs, const CancelToken& cancel = {});

// {"error": message} with `status`.
HttpResponse error_response(int status, const std::string& message);

}  // namespace grove::serve

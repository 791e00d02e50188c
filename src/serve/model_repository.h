#pragma once
// The models a server offers, by name. Each has one Session on the server's one Engine, so
// every request of every model is a job in the same ready pool. Loading and unloading swap
// entries under a mutex; a request holds its model by shared_ptr, so unloading never pulls a
// model from under a request in flight.
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "grove/dynamic.h"
#include "runtime/session.h"
#include "serve/dynamic_batcher.h"
#include "serve/metrics.h"

namespace grove::serve {

struct ServedModel {
  std::string name;
  std::string path;
  std::unique_ptr<Session> session;
  std::unique_ptr<DynamicBatcher> batcher;  // null: each request runs alone (declared after the session it uses)
  std::string batching_note;                // why batching is off for this model, when it was asked for
  // A dynamic model's sub-nets (docs/dynamic.md), for requests that name one or give a
  // latency target; null for other models. Requests without those run `session`.
  std::unique_ptr<DynamicSession> dynamic;
  std::vector<ValueSpec> inputs, outputs;
  ModelMetrics metrics;
  // run_memory_estimate's answers per input shapes (a few: cleared when full), so that a
  // request's estimate is a lookup, and the plan it came from may leave the session's cache.
  std::mutex estimates_mutex;
  std::map<ShapeMap, int64_t> memory_estimates;
};

// Dynamic batching for every model that allows it (max_batch 0: off).
struct BatchingOptions {
  int max_batch = 0;
  std::chrono::microseconds max_delay{2000};
};

struct RepositoryEntry {
  std::string name;
  std::string state;   // "READY" or "UNAVAILABLE"
  std::string reason;  // why unavailable (unloaded, or the load error)
};

class ModelRepository {
 public:
  // `directory`: where load-by-name finds models ("" for none): NAME.onnx, NAME/model.onnx
  // or NAME/1/model.onnx.
  // `session`: options of every model's Session (e.g. its precision).
  ModelRepository(Engine& engine, Limits limits, std::string directory, BatchingOptions batching = {},
                  SessionOptions session = {});

  // Loads (or reloads) `name` from `path`, or from the directory when `path` is empty.
  // Throws HttpError: 400 for a bad name, 404 when the directory has no such model, 400 when
  // the model does not load (the loader's one-line error).
  void load(const std::string& name, const std::string& path = "");
  // Throws HttpError(404) for a name that is not loaded.
  void unload(const std::string& name);
  // Every model of the directory and every one ever loaded, with its state.
  std::vector<RepositoryEntry> index() const;
  // Null when not loaded.
  std::shared_ptr<ServedModel> find(const std::string& name) const;
  std::vector<std::shared_ptr<ServedModel>> loaded() const;
  // How many models are loaded (what each request asks: one model, or a mix to co-serve).
  size_t loaded_count() const;
  // Models in the directory, by name.
  std::vector<std::string> directory_models() const;

  // Names are one path component of [A-Za-z0-9_.-], not starting with '.'.
  static bool valid_name(const std::string& name);

 private:
  std::string path_in_directory(const std::string& name) const;  // "" when none

  Engine& engine_;
  Limits limits_;
  std::string directory_;
  BatchingOptions batching_;
  SessionOptions session_options_;
  mutable std::mutex mutex_;
  std::map<std::string, std::shared_ptr<ServedModel>> models_;
  std::map<std::string, std::string> unavailable_;  // name -> reason
};

}  // namespace grove::serve

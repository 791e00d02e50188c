#pragma once
// Dynamic batching for one model: requests that arrive close together are joined along
// dimension 0 into one run, and each gets its own rows of the outputs back. The batcher's
// thread waits for a first request, gathers more of the same shape (past dimension 0) until
// `max_batch` rows or `max_delay` after the first, runs the batch on the Session (taking part
// in its tiles, as Engine::run's caller), and splits the outputs; requests arriving meanwhile
// form the next batch. Only for models whose inputs and outputs all have a free dimension 0.
#include <chrono>
#include <condition_variable>
#include <deque>
#include <future>
#include <mutex>
#include <string>
#include <thread>

#include "runtime/session.h"

namespace grove::serve {

struct BatchStats {
  int64_t batches = 0;
  int64_t requests = 0;  // requests served in batches; requests / batches is the mean batch
};

class DynamicBatcher {
 public:
  DynamicBatcher(Session& session, int max_batch, std::chrono::microseconds max_delay);
  ~DynamicBatcher();  // answers what is queued, then stops

  // "" when the model can be batched; else why not (for the server's start-up message).
  static std::string why_not_batchable(const std::vector<ValueSpec>& inputs, const std::vector<ValueSpec>& outputs);

  // Every input must have at least one dimension; its rows join the next batch.
  std::future<TensorMap> submit(TensorMap inputs);
  BatchStats stats() const;

 private:
  struct Pending {
    TensorMap inputs;
    int64_t rows = 0;
    std::promise<TensorMap> result;
  };
  void loop();
  void run_batch(std::vector<Pending>& batch);

  Session& session_;
  const int64_t max_batch_;
  const std::chrono::microseconds max_delay_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Pending> queue_;
  bool stopping_ = false;
  BatchStats stats_;
  std::thread thread_;
};

}  // namespace grove::serve

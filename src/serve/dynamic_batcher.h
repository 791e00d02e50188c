#pragma once
// Dynamic batching for one model: requests that arrive close together are joined along
// dimension 0 into one run, and each gets its own rows of the outputs back. The batcher's
// thread waits for a first request, gathers more of the same shape (past dimension 0) until
// `max_batch` rows or `max_delay` after the first, and submits the batch to the Session; a
// second thread waits for batches in order and splits their outputs. At most
// kBatchesInFlight batches run at once, so while one runs the next one fills up, and the
// ready pool always has a second batch's tiles to fill the first one's tail with. Only for
// models whose inputs and outputs all have a free dimension 0.
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

  // Every input must have at least one dimension; its rows join the next batch. A request
  // whose `cancel` stops while it waits joins no batch (its future holds the cancelled
  // Error); a batch runs with a deadline only when each of its requests has one (the
  // latest), so that one request's cancel never cuts the others short.
  std::future<TensorMap> submit(TensorMap inputs, CancelToken cancel = {});
  BatchStats stats() const;

 private:
  struct Pending {
    TensorMap inputs;
    int64_t rows = 0;
    std::promise<TensorMap> result;
    CancelToken cancel;
  };
  struct Batch {
    std::vector<Pending> requests;
    int64_t rows = 0;
    std::future<TensorMap> outputs;
  };
  static constexpr int kBatchesInFlight = 2;

  void form_batches();   // the batcher thread
  void split_batches();  // the splitter thread
  void submit_batch(Batch& batch);
  static void split(Batch& batch);

  Session& session_;
  const int64_t max_batch_;
  const std::chrono::microseconds max_delay_;
  mutable std::mutex mutex_;
  std::condition_variable wake_;
  std::deque<Pending> queue_;
  std::deque<Batch> running_;  // submitted, in order; the splitter takes them from the front
  bool stopping_ = false;
  bool forming_done_ = false;  // the batcher thread has submitted its last batch
  BatchStats stats_;
  std::thread batcher_, splitter_;
};

}  // namespace grove::serve

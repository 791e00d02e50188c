#include "serve/dynamic_batcher.h"

#include <algorithm>
#include <cstring>

namespace grove::serve {
namespace {

// Requests may share a batch when every input agrees in name, dtype and every dim past 0.
bool same_signature(const TensorMap& a, const TensorMap& b) {
  if (a.size() != b.size()) return false;
  for (auto ia = a.begin(), ib = b.begin(); ia != a.end(); ++ia, ++ib) {
    if (ia->first != ib->first || ia->second.dtype() != ib->second.dtype() || ia->second.rank() != ib->second.rank())
      return false;
    for (int64_t d = 1; d < ia->second.rank(); ++d)
      if (ia->second.dim(d) != ib->second.dim(d)) return false;
  }
  return true;
}

}  // namespace

std::string DynamicBatcher::why_not_batchable(const std::vector<ValueSpec>& inputs, const std::vector<ValueSpec>& outputs) {
  for (const auto* list : {&inputs, &outputs})
    for (const ValueSpec& v : *list)
      if (!v.shape_known || v.dims.empty() || v.dims[0] >= 0)
        return (list == &inputs ? "input '" : "output '") + v.name + "' has no free first dimension to batch along";
  return "";
}

DynamicBatcher::DynamicBatcher(Session& session, int max_batch, std::chrono::microseconds max_delay)
    : session_(session), max_batch_(std::max(1, max_batch)), max_delay_(max_delay) {
  batcher_ = std::thread([this] { form_batches(); });
  splitter_ = std::thread([this] { split_batches(); });
}

DynamicBatcher::~DynamicBatcher() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  batcher_.join();
  splitter_.join();
}

std::future<TensorMap> DynamicBatcher::submit(TensorMap inputs, CancelToken cancel) {
  Pending p;
  p.cancel = std::move(cancel);
  p.rows = -1;
  for (const auto& [name, t] : inputs) {
    if (t.rank() == 0) throw Error("input '" + name + "' is a scalar: dynamic batching joins inputs along their first dimension");
    if (p.rows >= 0 && t.dim(0) != p.rows)
      throw Error("input '" + name + "' has " + std::to_string(t.dim(0)) + " rows, another input " + std::to_string(p.rows) +
                  ": dynamic batching needs the same first dimension in every input");
    p.rows = t.dim(0);
  }
  p.inputs = std::move(inputs);
  std::future<TensorMap> result = p.result.get_future();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    queue_.push_back(std::move(p));
  }
  // All: the batch former and the splitter wait on this one condition, and a notify_one that
  // woke the splitter (nothing to split) left the request queued with the former asleep.
  wake_.notify_all();
  return result;
}

BatchStats DynamicBatcher::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void DynamicBatcher::form_batches() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return (stopping_ || !queue_.empty()) && running_.size() < kBatchesInFlight; });
    if (queue_.empty()) break;  // stopping, nothing left
    // Wait for company until the first request has waited max_delay, or a batch is full.
    const auto deadline = std::chrono::steady_clock::now() + max_delay_;
    auto rows_like_first = [&] {
      int64_t rows = 0;
      for (const Pending& p : queue_)
        if (same_signature(p.inputs, queue_.front().inputs)) rows += p.rows;
      return rows;
    };
    wake_.wait_until(lock, deadline, [&] { return stopping_ || rows_like_first() >= max_batch_; });
    Batch batch;
    for (auto it = queue_.begin(); it != queue_.end();) {
      if (it->cancel.stopped()) {  // cancelled while it waited: answered, and no rows spent on it
        it->result.set_exception(std::make_exception_ptr(Error(it->cancel.reason(), Error::Kind::cancelled)));
        it = queue_.erase(it);
        continue;
      }
      bool fits = batch.requests.empty() ||
                  (same_signature(it->inputs, batch.requests.front().inputs) && batch.rows + it->rows <= max_batch_);
      if (fits) {
        batch.rows += it->rows;
        batch.requests.push_back(std::move(*it));
        it = queue_.erase(it);
      } else {
        ++it;
      }
    }
    if (batch.requests.empty()) continue;  // every request waiting was cancelled
    lock.unlock();
    submit_batch(batch);
    lock.lock();
    stats_.batches += 1;
    stats_.requests += static_cast<int64_t>(batch.requests.size());
    running_.push_back(std::move(batch));
    wake_.notify_all();
  }
  forming_done_ = true;
  wake_.notify_all();
}

void DynamicBatcher::split_batches() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return forming_done_ || !running_.empty(); });
    if (running_.empty()) return;  // forming_done_ and nothing left
    Batch batch = std::move(running_.front());
    running_.pop_front();
    lock.unlock();
    split(batch);
    lock.lock();
    wake_.notify_all();  // a slot for the next batch
  }
}

void DynamicBatcher::submit_batch(Batch& batch) {
  std::vector<Pending>& requests = batch.requests;
  try {
    if (requests.size() == 1) {
      batch.outputs = session_.submit(requests[0].inputs, requests[0].cancel);
      return;
    }
    // The batch stops at the latest of its requests' deadlines, or never if one has none.
    CancelToken cancel;
    auto latest = CancelToken::Clock::time_point::min();
    bool every_one_has_a_deadline = true;
    for (const Pending& p : requests) {
      every_one_has_a_deadline = every_one_has_a_deadline && p.cancel.has_deadline();
      latest = std::max(latest, p.cancel.deadline());
    }
    if (every_one_has_a_deadline)
      cancel = CancelToken::until(latest, std::chrono::duration<double>(latest - CancelToken::Clock::now()).count());
    TensorMap joined;
    for (const auto& [name, first] : requests[0].inputs) {
      Shape shape = first.shape();
      shape[0] = batch.rows;
      Tensor t(first.dtype(), shape);
      size_t offset = 0;
      for (const Pending& p : requests) {
        const Tensor& part = p.inputs.at(name);
        if (part.bytes()) std::memcpy(t.raw() + offset, part.raw(), part.bytes());
        offset += part.bytes();
      }
      joined[name] = std::move(t);
    }
    batch.outputs = session_.submit(std::move(joined), std::move(cancel));
  } catch (...) {
    std::promise<TensorMap> failed;
    failed.set_exception(std::current_exception());
    batch.outputs = failed.get_future();
  }
}

void DynamicBatcher::split(Batch& batch) {
  std::vector<Pending>& requests = batch.requests;
  try {
    TensorMap outputs = batch.outputs.get();
    if (requests.size() == 1) {
      requests[0].result.set_value(std::move(outputs));
      return;
    }
    std::vector<TensorMap> parts(requests.size());
    for (const auto& [name, out] : outputs) {
      if (out.rank() == 0 || out.dim(0) != batch.rows)
        throw Error("dynamic batching: output '" + name + "' has shape " + shape_str(out.shape()) + ", not the batch's " +
                    std::to_string(batch.rows) + " rows first");
      const size_t row_bytes = out.bytes() / static_cast<size_t>(batch.rows);
      size_t offset = 0;
      for (size_t i = 0; i < requests.size(); ++i) {
        Shape shape = out.shape();
        shape[0] = requests[i].rows;
        Tensor part(out.dtype(), shape);
        if (part.bytes()) std::memcpy(part.raw(), out.raw() + offset, part.bytes());
        offset += static_cast<size_t>(requests[i].rows) * row_bytes;
        parts[i][name] = std::move(part);
      }
    }
    for (size_t i = 0; i < requests.size(); ++i) requests[i].result.set_value(std::move(parts[i]));
  } catch (...) {
    for (Pending& p : requests) p.result.set_exception(std::current_exception());
  }
}

}  // namespace grove::serve

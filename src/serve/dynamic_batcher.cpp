#include "serve/dynamic_batcher.h"

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
    : session_(session), max_batch_(std::max(1, max_batch)), max_delay_(max_delay), thread_([this] { loop(); }) {}

DynamicBatcher::~DynamicBatcher() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    stopping_ = true;
  }
  wake_.notify_all();
  thread_.join();
}

std::future<TensorMap> DynamicBatcher::submit(TensorMap inputs) {
  Pending p;
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
  wake_.notify_one();
  return result;
}

BatchStats DynamicBatcher::stats() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return stats_;
}

void DynamicBatcher::loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return stopping_ || !queue_.empty(); });
    if (queue_.empty()) return;  // stopping, nothing left
    // Wait for company until the first request has waited max_delay, or a batch is full.
    const auto deadline = std::chrono::steady_clock::now() + max_delay_;
    auto rows_like_first = [&] {
      int64_t rows = 0;
      for (const Pending& p : queue_)
        if (same_signature(p.inputs, queue_.front().inputs)) rows += p.rows;
      return rows;
    };
    wake_.wait_until(lock, deadline, [&] { return stopping_ || rows_like_first() >= max_batch_; });
    std::vector<Pending> batch;
    int64_t rows = 0;
    for (auto it = queue_.begin(); it != queue_.end();) {
      bool fits = batch.empty() || (same_signature(it->inputs, batch.front().inputs) && rows + it->rows <= max_batch_);
      if (fits) {
        rows += it->rows;
        batch.push_back(std::move(*it));
        it = queue_.erase(it);
      } else {
        ++it;
      }
    }
    lock.unlock();
    run_batch(batch);
    lock.lock();
    stats_.batches += 1;
    stats_.requests += static_cast<int64_t>(batch.size());
  }
}

void DynamicBatcher::run_batch(std::vector<Pending>& batch) {
  try {
    TensorMap joined;
    int64_t total = 0;
    for (const Pending& p : batch) total += p.rows;
    if (batch.size() == 1) {
      joined = batch[0].inputs;
    } else {
      for (const auto& [name, first] : batch[0].inputs) {
        Shape shape = first.shape();
        shape[0] = total;
        Tensor t(first.dtype(), shape);
        size_t offset = 0;
        for (const Pending& p : batch) {
          const Tensor& part = p.inputs.at(name);
          if (part.bytes()) std::memcpy(t.raw() + offset, part.raw(), part.bytes());
          offset += part.bytes();
        }
        joined[name] = std::move(t);
      }
    }
    TensorMap outputs = session_.run(joined);
    if (batch.size() == 1) {
      batch[0].result.set_value(std::move(outputs));
      return;
    }
    std::vector<TensorMap> split(batch.size());
    for (const auto& [name, out] : outputs) {
      if (out.rank() == 0 || out.dim(0) != total)
        throw Error("dynamic batching: output '" + name + "' has shape " + shape_str(out.shape()) + ", not the batch's " +
                    std::to_string(total) + " rows first");
      const size_t row_bytes = out.bytes() / static_cast<size_t>(total);
      size_t offset = 0;
      for (size_t i = 0; i < batch.size(); ++i) {
        Shape shape = out.shape();
        shape[0] = batch[i].rows;
        Tensor part(out.dtype(), shape);
        if (part.bytes()) std::memcpy(part.raw(), out.raw() + offset, part.bytes());
        offset += static_cast<size_t>(batch[i].rows) * row_bytes;
        split[i][name] = std::move(part);
      }
    }
    for (size_t i = 0; i < batch.size(); ++i) batch[i].result.set_value(std::move(split[i]));
  } catch (...) {
    for (Pending& p : batch) p.result.set_exception(std::current_exception());
  }
}

}  // namespace grove::serve

#include "serve/connection_pool.h"

namespace grove::serve {

ConnectionPool::ConnectionPool(size_t threads, size_t max_held) : max_held_(std::max(threads, max_held)) {
  for (size_t i = 0; i < std::max<size_t>(1, threads); ++i) workers_.emplace_back([this] { run(jobs_, true); });
  shedder_ = std::thread([this] { run(shed_jobs_, false); });
  // Read by shedding() only in jobs, which reach their threads through mutex_ after this.
  shed_id_ = shedder_.get_id();
}

ConnectionPool::~ConnectionPool() { shutdown(); }

void ConnectionPool::enqueue(std::function<void()> fn) {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    (active_ + jobs_.size() < max_held_ ? jobs_ : shed_jobs_).push_back(std::move(fn));
  }
  wake_.notify_all();  // one condition for both queues: notify_one could wake the wrong kind
}

void ConnectionPool::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  wake_.notify_all();
  for (std::thread& t : workers_) t.join();
  shedder_.join();
}

void ConnectionPool::run(std::deque<std::function<void()>>& queue, bool counts) {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake_.wait(lock, [&] { return !queue.empty() || stopping_; });
    if (queue.empty()) return;  // stopping, and every accepted connection was run
    std::function<void()> fn = std::move(queue.front());
    queue.pop_front();
    if (counts) ++active_;
    lock.unlock();
    fn();
    lock.lock();
    if (counts) --active_;
  }
}

}  // namespace grove::serve

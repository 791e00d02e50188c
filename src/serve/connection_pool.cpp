#include "serve/connection_pool.h"

namespace grove::serve {

ConnectionPool::ConnectionPool(size_t threads, size_t max_held) : max_held_(std::max(threads, max_held)) {
  for (size_t i = 0; i < std::max<size_t>(1, threads); ++i) workers_.emplace_back([this] { run(jobs_, work_, true); });
  shedder_ = std::thread([this] { run(shed_jobs_, shed_, false); });
  // Read by shedding() only in jobs, which reach their threads through mutex_ after this.
  shed_id_ = shedder_.get_id();
}

ConnectionPool::~ConnectionPool() { shutdown(); }

void ConnectionPool::enqueue(std::function<void()> fn) {
  bool serve;
  {
    std::lock_guard<std::mutex> lock(mutex_);
    serve = active_ + jobs_.size() < max_held_;
    (serve ? jobs_ : shed_jobs_).push_back(std::move(fn));
  }
  (serve ? work_ : shed_).notify_one();
}

void ConnectionPool::shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (stopping_) return;
    stopping_ = true;
  }
  work_.notify_all();
  shed_.notify_all();
  for (std::thread& t : workers_) t.join();
  shedder_.join();
}

void ConnectionPool::run(std::deque<std::function<void()>>& queue, std::condition_variable& wake, bool counts) {
  std::unique_lock<std::mutex> lock(mutex_);
  for (;;) {
    wake.wait(lock, [&] { return !queue.empty() || stopping_; });
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

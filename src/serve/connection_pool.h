#pragma once
// The HTTP threads as cpp-httplib's task queue. httplib's own ThreadPool queues every accepted
// connection without bound, so under a burst clients wait unanswered (or time out) before the
// server even reads their requests. This pool holds at most `max_held` connections, served or
// waiting for a thread; the rest go to one shedding thread, which answers them 503 at once.
#include <httplib.h>

#include <condition_variable>
#include <deque>
#include <functional>
#include <mutex>
#include <thread>
#include <vector>

namespace grove::serve {

class ConnectionPool : public httplib::TaskQueue {
 public:
  ConnectionPool(size_t threads, size_t max_held);
  ~ConnectionPool() override;

  void enqueue(std::function<void()> fn) override;
  // Runs every connection already accepted (served, or shed), then joins the threads.
  void shutdown() override;
  // True on the shedding thread: the connection it runs is to be refused, not served.
  bool shedding() const { return std::this_thread::get_id() == shed_id_; }

 private:
  void run(std::deque<std::function<void()>>& queue, std::condition_variable& wake, bool counts);

  std::mutex mutex_;
  std::condition_variable work_, shed_;  // one per queue, so a connection wakes one thread
  std::deque<std::function<void()>> jobs_, shed_jobs_;
  size_t active_ = 0;  // connections being served
  size_t max_held_;
  bool stopping_ = false;
  std::vector<std::thread> workers_;
  std::thread shedder_;
  std::thread::id shed_id_;
};

}  // namespace grove::serve

#pragma once
// One connection's socket as cpp-httplib reads and writes it, with a deadline over a whole
// phase (headers, body, response) rather than over each read: httplib's own stream times out
// every read alone, so a client sending a byte a second would never hit its timeout.
#include <httplib.h>

#include <array>
#include <chrono>

namespace grove::serve {

class DeadlineStream : public httplib::Stream {
 public:
  using clock = std::chrono::steady_clock;
  enum class Failure { none, timed_out, over_budget };

  explicit DeadlineStream(int fd) : fd_(fd) {}

  // Waits up to `timeout` for the first byte of a request, returning early (false) when
  // `stopping()` turns true or the client closes. Bytes already arrived count even when
  // stopping: a connection accepted before the server stopped gets its request answered.
  template <class Stopping>
  bool wait_for_request(clock::duration timeout, Stopping stopping) {
    const auto until = clock::now() + timeout;
    for (clock::duration wait = clock::duration::zero(); !has_buffered();) {
      int ready = poll_in(wait);
      if (ready < 0) return false;
      if (ready > 0) return fill() > 0;
      if (stopping() || clock::now() >= until) return false;
      wait = std::min<clock::duration>(until - clock::now(), std::chrono::milliseconds(100));
    }
    return true;
  }

  // A new phase: reads and writes must be done by `deadline`, and at most `read_budget` bytes
  // may be read in it (over: reads fail with Failure::over_budget).
  void start_phase(clock::time_point deadline, size_t read_budget) {
    deadline_ = deadline;
    budget_ = read_budget;
    failure_ = Failure::none;
  }
  void start_request() { written_ = 0; }
  Failure failure() const { return failure_; }
  size_t written() const { return written_; }  // bytes of responses since start_request()

  bool is_readable() const override;
  bool is_writable() const override;
  ssize_t read(char* ptr, size_t size) override;
  ssize_t write(const char* ptr, size_t size) override;
  void get_remote_ip_and_port(std::string& ip, int& port) const override;
  void get_local_ip_and_port(std::string& ip, int& port) const override;
  socket_t socket() const override { return fd_; }

 private:
  bool has_buffered() const { return pos_ < end_; }
  int poll_in(clock::duration timeout) const;
  ssize_t fill();                       // one recv into the buffer: >0 bytes, 0 closed, <0 error
  int ms_left();                        // until the deadline; 0 and Failure::timed_out when past

  int fd_;
  clock::time_point deadline_ = clock::time_point::max();
  size_t budget_ = SIZE_MAX;
  Failure failure_ = Failure::none;
  size_t written_ = 0;
  // httplib reads request lines a byte at a time: a buffer saves a recv per byte. It lives as
  // long as the connection, so bytes of a pipelined next request are kept.
  std::array<char, 4096> buf_{};
  size_t pos_ = 0, end_ = 0;
};

}  // namespace grove::serve

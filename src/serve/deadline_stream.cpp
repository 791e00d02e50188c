#include "serve/deadline_stream.h"

#include <arpa/inet.h>
#include <netinet/in.h>
#include <poll.h>
#include <sys/socket.h>

#include <cerrno>
#include <cstring>

namespace grove::serve {
namespace {

void address_of(const sockaddr_storage& addr, std::string& ip, int& port) {
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto& a = reinterpret_cast<const sockaddr_in&>(addr);
    inet_ntop(AF_INET, &a.sin_addr, text, sizeof text);
    port = ntohs(a.sin_port);
  } else if (addr.ss_family == AF_INET6) {
    const auto& a = reinterpret_cast<const sockaddr_in6&>(addr);
    inet_ntop(AF_INET6, &a.sin6_addr, text, sizeof text);
    port = ntohs(a.sin6_port);
  }
  ip = text;
}

int poll_one(int fd, short events, int timeout_ms) {
  pollfd p{fd, events, 0};
  int r;
  do r = ::poll(&p, 1, timeout_ms);
  while (r < 0 && errno == EINTR);
  return r;
}

}  // namespace

int DeadlineStream::poll_in(clock::duration timeout) const {
  auto ms = std::chrono::ceil<std::chrono::milliseconds>(timeout).count();
  return poll_one(fd_, POLLIN, static_cast<int>(std::max<int64_t>(0, ms)));
}

int DeadlineStream::ms_left() {
  if (deadline_ == clock::time_point::max()) return -1;  // poll's "no timeout"
  auto left = std::chrono::ceil<std::chrono::milliseconds>(deadline_ - clock::now()).count();
  if (left <= 0) {
    failure_ = Failure::timed_out;
    return 0;
  }
  return static_cast<int>(std::min<int64_t>(left, INT32_MAX));
}

ssize_t DeadlineStream::fill() {
  ssize_t n;
  do n = ::recv(fd_, buf_.data(), buf_.size(), MSG_DONTWAIT);
  while (n < 0 && errno == EINTR);
  pos_ = 0;
  end_ = n > 0 ? static_cast<size_t>(n) : 0;
  return n;
}

bool DeadlineStream::is_readable() const { return has_buffered() || poll_in(clock::duration::zero()) > 0; }

bool DeadlineStream::is_writable() const { return poll_one(fd_, POLLOUT, 0) > 0; }

ssize_t DeadlineStream::read(char* ptr, size_t size) {
  if (failure_ != Failure::none) return -1;
  if (budget_ == 0) {
    failure_ = Failure::over_budget;
    return -1;
  }
  size = std::min(size, budget_);
  if (!has_buffered()) {
    int ms = ms_left();
    if (failure_ != Failure::none) return -1;
    int ready = poll_one(fd_, POLLIN, ms);
    if (ready == 0) failure_ = Failure::timed_out;
    if (ready <= 0) return -1;
    if (size >= buf_.size()) {  // a large read (body bytes) skips the buffer's copy
      ssize_t got;
      do got = ::recv(fd_, ptr, size, MSG_DONTWAIT);
      while (got < 0 && errno == EINTR);
      if (got > 0 && budget_ != SIZE_MAX) budget_ -= static_cast<size_t>(got);
      return got;
    }
    ssize_t got = fill();
    if (got <= 0) return got;  // 0: the client closed
  }
  size_t n = std::min(size, end_ - pos_);
  std::memcpy(ptr, buf_.data() + pos_, n);
  pos_ += n;
  if (budget_ != SIZE_MAX) budget_ -= n;
  return static_cast<ssize_t>(n);
}

ssize_t DeadlineStream::write(const char* ptr, size_t size) {
  if (failure_ != Failure::none) return -1;
  int ms = ms_left();
  if (failure_ != Failure::none) return -1;
  int ready = poll_one(fd_, POLLOUT, ms);
  if (ready == 0) failure_ = Failure::timed_out;
  if (ready <= 0) return -1;
  ssize_t n;
  do n = ::send(fd_, ptr, size, MSG_NOSIGNAL);
  while (n < 0 && errno == EINTR);
  if (n > 0) written_ += static_cast<size_t>(n);
  return n;
}

void DeadlineStream::get_remote_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getpeername(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) address_of(addr, ip, port);
}

void DeadlineStream::get_local_ip_and_port(std::string& ip, int& port) const {
  sockaddr_storage addr{};
  socklen_t len = sizeof addr;
  if (::getsockname(fd_, reinterpret_cast<sockaddr*>(&addr), &len) == 0) address_of(addr, ip, port);
}

}  // namespace grove::serve

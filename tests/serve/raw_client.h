#pragma once
// A TCP client on loopback for requests httplib's client will not send: stalled bodies, bytes
// dribbled one at a time, framing the server must refuse, many connections at once.
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <chrono>
#include <cstring>
#include <string>
#include <string_view>

namespace grove::test {

class RawClient {
 public:
  // wait = false: connect() does not wait for the handshake (see finish_connect), so that
  // many clients reach the server's accept queue at once.
  explicit RawClient(int port, bool wait = true) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | (wait ? 0 : SOCK_NONBLOCK), 0);
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(static_cast<uint16_t>(port));
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    int one = 1;
    ::setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    connected_ = ::connect(fd_, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0;
    if (!wait) connecting_ = !connected_ && errno == EINPROGRESS;
  }

  // For a client made with wait = false: true once connected (within `timeout_s`), and its
  // socket blocking again.
  bool finish_connect(double timeout_s) {
    if (connecting_) {
      pollfd p{fd_, POLLOUT, 0};
      int err = 0;
      socklen_t len = sizeof err;
      connected_ = ::poll(&p, 1, static_cast<int>(timeout_s * 1000)) > 0 &&
                   ::getsockopt(fd_, SOL_SOCKET, SO_ERROR, &err, &len) == 0 && err == 0;
      connecting_ = false;
    }
    ::fcntl(fd_, F_SETFL, ::fcntl(fd_, F_GETFL) & ~O_NONBLOCK);
    return connected_;
  }
  ~RawClient() { ::close(fd_); }
  RawClient(const RawClient&) = delete;
  RawClient& operator=(const RawClient&) = delete;

  bool connected() const { return connected_; }
  int fd() const { return fd_; }

  // All of `bytes`, or false once the server stops taking them.
  bool send(std::string_view bytes) {
    while (!bytes.empty()) {
      ssize_t n = ::send(fd_, bytes.data(), bytes.size(), MSG_NOSIGNAL);
      if (n <= 0) return false;
      bytes.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // One response (headers, then Content-Length bytes of body), or what came before the
  // server closed or `timeout_s` passed ("" when nothing came).
  std::string read_response(double timeout_s) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    std::string got;
    for (;;) {
      size_t end = got.find("\r\n\r\n");
      if (end != std::string::npos) {
        size_t cl = got.find("Content-Length: ");
        size_t want = end + 4 + (cl != std::string::npos && cl < end ? std::stoul(got.substr(cl + 16)) : 0);
        if (got.size() >= want) return got.substr(0, want);
      }
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now()).count();
      pollfd p{fd_, POLLIN, 0};
      // Past the time, still take what has arrived.
      if (::poll(&p, 1, static_cast<int>(std::max<int64_t>(0, ms))) <= 0) return got;
      char buf[65536];
      ssize_t n = ::recv(fd_, buf, sizeof buf, 0);
      if (n <= 0) return got;
      got.append(buf, static_cast<size_t>(n));
    }
  }

  // True when the server closed the connection within `timeout_s` (reading and dropping bytes).
  bool closed_within(double timeout_s) {
    const auto until = std::chrono::steady_clock::now() + std::chrono::duration<double>(timeout_s);
    for (;;) {
      auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(until - std::chrono::steady_clock::now()).count();
      pollfd p{fd_, POLLIN, 0};
      if (ms <= 0 || ::poll(&p, 1, static_cast<int>(ms)) <= 0) return false;
      char buf[4096];
      if (::recv(fd_, buf, sizeof buf, 0) <= 0) return true;
    }
  }

 private:
  int fd_ = -1;
  bool connected_ = false;
  bool connecting_ = false;
};

// 200 from "HTTP/1.1 200 OK\r\n...", 0 when there is no status line.
inline int status_of(const std::string& response) {
  if (response.rfind("HTTP/1.1 ", 0) != 0 || response.size() < 12) return 0;
  return std::atoi(response.substr(9, 3).c_str());
}

inline std::string body_of(const std::string& response) {
  size_t end = response.find("\r\n\r\n");
  return end == std::string::npos ? "" : response.substr(end + 4);
}

}  // namespace grove::test

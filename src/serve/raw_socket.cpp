#include "serve/raw_socket.h"

#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>

#include "serve/inference_server.h"

namespace grove::serve {

using clock = std::chrono::steady_clock;

void send_raw(int fd, int status, const std::string& reason, clock::duration timeout) {
  const char* text = status == 408 ? "Request Timeout" : status == 431 ? "Request Header Fields Too Large" : "Service Unavailable";
  std::string body = error_response(status, reason).body;
  std::string out = "HTTP/1.1 " + std::to_string(status) + " " + text +
                    "\r\nContent-Type: application/json\r\nConnection: close\r\nContent-Length: " + std::to_string(body.size()) +
                    (status == 503 ? "\r\nRetry-After: 1" : "") + "\r\n\r\n" + body;
  const auto until = clock::now() + timeout;
  for (size_t sent = 0; sent < out.size();) {
    pollfd p{fd, POLLOUT, 0};
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(until - clock::now()).count();
    if (ms <= 0 || ::poll(&p, 1, static_cast<int>(ms)) <= 0) return;
    ssize_t n = ::send(fd, out.data() + sent, out.size() - sent, MSG_NOSIGNAL | MSG_DONTWAIT);
    if (n < 0 && errno != EAGAIN && errno != EINTR) return;
    if (n > 0) sent += static_cast<size_t>(n);
  }
}

void drain(int fd, clock::duration limit, clock::duration quiet) {
  const auto until = clock::now() + limit;
  char scratch[16384];
  for (;;) {
    pollfd p{fd, POLLIN, 0};
    auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::min(until - clock::now(), quiet)).count();
    if (ms <= 0 || ::poll(&p, 1, static_cast<int>(ms)) <= 0) return;
    ssize_t n = ::recv(fd, scratch, sizeof scratch, MSG_DONTWAIT);
    if (n == 0 || (n < 0 && errno != EAGAIN && errno != EINTR)) return;
  }
}

void lingering_close(int fd, clock::duration limit) {
  ::shutdown(fd, SHUT_WR);
  drain(fd, limit, std::chrono::milliseconds(100));
  ::close(fd);
}

}  // namespace grove::serve

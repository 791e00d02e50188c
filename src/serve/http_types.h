#pragma once
// A request and a response as the server's handlers see them: no sockets, so the handlers run
// the same in-process (tests, the fuzzer) as behind the HTTP listener.
#include <functional>
#include <map>
#include <stdexcept>
#include <string>
#include <string_view>

namespace grove::serve {

struct HttpRequest {
  std::string method;  // "GET", "POST"
  std::string path;    // without the query string
  std::map<std::string, std::string> headers;  // names in lower case
  std::string body;

  const std::string* header(const std::string& lower_name) const {
    auto it = headers.find(lower_name);
    return it == headers.end() ? nullptr : &it->second;
  }
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::map<std::string, std::string> headers;
  std::string body;
  // A response sent while it is made (Server-Sent Events): when set, it is called once after
  // the headers go out, and what it passes to `write` is sent at once, after `body`. `write`
  // returns false once the client is gone; `stream` should stop then. It catches its own
  // errors: the status is sent before it runs.
  using Write = std::function<bool(std::string_view)>;
  std::function<void(const Write& write)> stream;
};

// The whole body of `r`, its stream run to the end: for callers without a socket.
inline std::string collect_body(const HttpResponse& r) {
  std::string all = r.body;
  if (r.stream)
    r.stream([&](std::string_view part) {
      all.append(part);
      return true;
    });
  return all;
}

// A request the server refuses: the status (4xx, or 5xx for the server's own failures) and a
// one-line reason, sent back as {"error": reason}.
class HttpError : public std::runtime_error {
 public:
  HttpError(int status, const std::string& reason) : std::runtime_error(reason), status_(status) {}
  int status() const { return status_; }

 private:
  int status_;
};

}  // namespace grove::serve

#pragma once
// A request and a response as the server's handlers see them: no sockets, so the handlers run
// the same in-process (tests, the fuzzer) as behind the HTTP listener.
#include <map>
#include <stdexcept>
#include <string>

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
};

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

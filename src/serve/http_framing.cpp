#include "serve/http_framing.h"

#include <cctype>

namespace grove::serve {
namespace {

std::string lower_trimmed(std::string s) {
  for (char& c : s) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
  size_t b = s.find_first_not_of(" \t"), e = s.find_last_not_of(" \t");
  return b == std::string::npos ? "" : s.substr(b, e - b + 1);
}

}  // namespace

std::optional<Refusal> refuse_before_body(const httplib::Request& req, int64_t max_body_bytes) {
  const std::string& m = req.method;
  if (m != "GET" && m != "HEAD" && m != "POST" && m != "PUT" && m != "DELETE" && m != "PATCH")
    return Refusal{405, "method " + m + " is not supported"};
  if (req.has_header("Transfer-Encoding")) {
    std::string te = lower_trimmed(req.get_header_value("Transfer-Encoding"));
    if (te != "chunked") return Refusal{501, "Transfer-Encoding '" + te + "' is not supported: send Content-Length or chunked"};
    if (req.has_header("Content-Length")) return Refusal{400, "both Content-Length and Transfer-Encoding given"};
  }
  if (req.has_header("Content-Encoding")) {
    std::string ce = lower_trimmed(req.get_header_value("Content-Encoding"));
    if (ce != "identity") return Refusal{415, "Content-Encoding '" + ce + "' is not supported: send the body uncompressed"};
  }
  if (req.has_header("Content-Length")) {
    if (req.get_header_value_count("Content-Length") > 1) return Refusal{400, "more than one Content-Length"};
    const std::string cl = req.get_header_value("Content-Length");
    bool digits = !cl.empty() && cl.size() <= 18;
    for (char c : cl) digits = digits && c >= '0' && c <= '9';
    if (!digits) return Refusal{400, "Content-Length '" + cl + "' is not a byte count"};
    if (std::stoll(cl) > max_body_bytes)
      return Refusal{413, "request body of " + cl + " bytes is over the limit of " + std::to_string(max_body_bytes) + " (--max-body-bytes)"};
  }
  if (req.is_multipart_form_data())
    return Refusal{415, "multipart bodies are not supported: send JSON, or JSON then binary tensor data"};
  return std::nullopt;
}

}  // namespace grove::serve

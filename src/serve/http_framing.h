#pragma once
// What the listener refuses from a request's line and headers alone, before a body byte is
// read: cpp-httplib would otherwise decompress (gzip, deflate, br) a body before any limit, or
// read one without a length until the client closes.
#include <httplib.h>

#include <cstdint>
#include <optional>
#include <string>

namespace grove::serve {

struct Refusal {
  int status;
  std::string reason;  // one line, naming what is wrong
};

std::optional<Refusal> refuse_before_body(const httplib::Request& req, int64_t max_body_bytes);

// Content-Length or Transfer-Encoding given: without either a request has no body (RFC 9112 6.3).
inline bool has_body(const httplib::Request& req) {
  return req.has_header("Content-Length") || req.has_header("Transfer-Encoding");
}

}  // namespace grove::serve

// Fuzz target: HTTP requests -> InferenceServer::handle, in-process (no sockets), over three
// small models. The first byte picks the method and endpoint; with the binary tensor data
// extension, the second gives the JSON header's length; the rest is the body. Every answer must
// be JSON with a status the protocol allows, and a 500 only from the model whose Gather can
// fail at run time. A first byte 'H' instead sends the rest as the raw bytes of one connection
// through the listener's parser and framing checks (HttpListener::answer_bytes): headers,
// Content-Encoding, chunked bodies, Content-Length, requests cut short, several requests.
#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <string>

#include <nlohmann/json.hpp>

#include "serve/http_listener.h"
#include "serve_test_util.h"

namespace {

using namespace grove;

struct Fixture {
  Fixture() : models(engine, {}, repo.dir()), server(engine, models, {.max_body_bytes = 1 << 16, .request_timeout_s = 10}) {
    repo.write("add.onnx", test::add_model());
    repo.write("pair.onnx", test::two_output_model());
    repo.write("lookup.onnx", test::gather_model());
    for (const char* name : {"add", "pair", "lookup"}) models.load(name);
  }
  test::TempRepository repo;
  Engine engine{{.threads = 1}};
  serve::ModelRepository models;
  serve::InferenceServer server;
  // Never bound: answer_bytes only. Its body limit is under -max_len, so 413 is reachable.
  serve::HttpListener listener{server, {}, 1 << 15};
};

// Each answer in `out` starts with a status line whose status the listener may send (httplib's
// own: 100 and 417 for Expect, 206 and 416 for Range, 414 for a long target).
bool answers_allowed(const std::string& out) {
  for (size_t at = out.find("HTTP/1.1 "); at != std::string::npos; at = out.find("\r\nHTTP/1.1 ", at + 1)) {
    if (out.compare(at, 2, "\r\n") == 0) at += 2;
    int status = std::atoi(out.c_str() + at + 9);
    static const int kAllowed[] = {100, 200, 206, 400, 404, 405, 408, 413, 414, 415, 416, 417, 431, 500, 501, 503};
    if (std::find(std::begin(kAllowed), std::end(kAllowed), status) == std::end(kAllowed)) return false;
  }
  return true;
}

const char* const kRoutes[][2] = {
    {"POST", "/v2/models/add/infer"},    {"POST", "/v2/models/pair/infer"},
    {"POST", "/v2/models/lookup/infer"}, {"POST", "/v2/models/add/versions/1/infer"},
    {"GET", "/v2/models/pair"},          {"POST", "/v2/repository/index"},
    {"POST", "/v2/repository/models/pair/unload"}, {"POST", "/v2/repository/models/pair/load"},
    {"GET", "/metrics"},                 {"GET", "/v2/health/ready"},
};

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static Fixture fixture;  // one server for the whole run, as in production
  if (size < 2) return 0;
  if (data[0] == 'H') {
    std::string out = fixture.listener.answer_bytes(std::string(reinterpret_cast<const char*>(data + 1), size - 1));
    if (!out.empty() && out.rfind("HTTP/1.1 ", 0) != 0) __builtin_trap();
    if (!answers_allowed(out)) __builtin_trap();
    return 0;
  }
  const auto& route = kRoutes[data[0] % (sizeof kRoutes / sizeof kRoutes[0])];
  serve::HttpRequest request{route[0], route[1], {}, std::string(reinterpret_cast<const char*>(data + 2), size - 2)};
  if (data[0] & 0x80) request.headers["inference-header-content-length"] = std::to_string(data[1]);
  serve::HttpResponse response = fixture.server.handle(request);
  const bool allowed = response.status == 200 || response.status == 400 || response.status == 404 ||
                       response.status == 405 || response.status == 413 || response.status == 503 ||
                       (response.status == 500 && request.path.find("lookup") != std::string::npos);
  if (!allowed) __builtin_trap();
  if (response.status != 200 && !nlohmann::json::accept(response.body)) __builtin_trap();
  return 0;
}

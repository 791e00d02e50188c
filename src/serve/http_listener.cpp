#include "serve/http_listener.h"

#include <httplib.h>

#include <cctype>

namespace grove::serve {

struct HttpListener::Impl {
  Impl(InferenceServer& s, ListenOptions o) : server(s), options(std::move(o)) {}
  InferenceServer& server;
  ListenOptions options;
  httplib::Server http;
  int port = -1;
};

namespace {

void answer(InferenceServer& server, const httplib::Request& req, std::string body, httplib::Response& res) {
  HttpRequest r;
  r.method = req.method;
  r.path = req.path;
  for (const auto& [name, value] : req.headers) {
    std::string lower = name;
    for (char& c : lower) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    r.headers[lower] = value;
  }
  r.body = std::move(body);
  HttpResponse out = server.handle(r);
  res.status = out.status;
  for (const auto& [name, value] : out.headers) res.set_header(name, value);
  res.set_content(std::move(out.body), out.content_type.c_str());
}

}  // namespace

HttpListener::HttpListener(InferenceServer& server, ListenOptions options, int64_t max_body_bytes)
    : impl_(std::make_unique<Impl>(server, options)) {
  httplib::Server& http = impl_->http;
  const int threads = std::max(1, options.http_threads);
  http.new_task_queue = [threads] { return new httplib::ThreadPool(static_cast<size_t>(threads)); };
  http.set_payload_max_length(static_cast<size_t>(max_body_bytes));
  // Without it a response written as header then body waits for the client's delayed ACK
  // (Nagle): about 40 ms added to every answer.
  http.set_tcp_nodelay(true);
  auto timeout_s = static_cast<time_t>(options.io_timeout_s);
  http.set_read_timeout(timeout_s, 0);
  http.set_write_timeout(timeout_s, 0);
  // Bodies are read through a content reader: httplib's own body reading caps a body sent as
  // application/x-www-form-urlencoded (what curl -d sends) at a few KiB.
  auto with_body = [&server](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& read) {
    if (req.is_multipart_form_data()) {
      HttpResponse e = error_response(415, "multipart bodies are not supported: send JSON, or JSON then binary tensor data");
      res.status = e.status;
      res.set_content(e.body, e.content_type.c_str());
      return;
    }
    std::string body;
    bool complete = read([&body](const char* data, size_t n) {
      body.append(data, n);
      return true;
    });
    if (!complete) {
      // httplib stops reading a body past set_payload_max_length (status 413) or a broken one.
      bool too_large = res.status == 413;
      HttpResponse e = error_response(too_large ? 413 : 400, too_large ? "request body over the limit (--max-body-bytes)"
                                                                         : "the request body could not be read");
      res.status = e.status;
      res.set_content(e.body, e.content_type.c_str());
      return;
    }
    answer(server, req, std::move(body), res);
  };
  auto without_body = [&server](const httplib::Request& req, httplib::Response& res) { answer(server, req, "", res); };
  http.Get(".*", without_body);
  http.Post(".*", with_body);
  http.Put(".*", with_body);
  http.Delete(".*", with_body);
  http.Patch(".*", with_body);
  http.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    HttpResponse e = error_response(500, "internal error while reading the request");
    res.status = e.status;
    res.set_content(e.body, e.content_type.c_str());
  });
  // httplib's own refusals (body over the limit, malformed HTTP) get a JSON body too.
  http.set_error_handler([max_body_bytes](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
    std::string reason = res.status == 413 ? "request body over the limit of " + std::to_string(max_body_bytes) + " bytes (--max-body-bytes)"
                                           : "HTTP error " + std::to_string(res.status);
    HttpResponse e = error_response(res.status, reason);
    res.set_content(e.body, e.content_type.c_str());
  });
}

HttpListener::~HttpListener() { stop(); }

int HttpListener::bind() {
  Impl& m = *impl_;
  m.port = m.options.port == 0 ? m.http.bind_to_any_port(m.options.host.c_str())
                               : (m.http.bind_to_port(m.options.host.c_str(), m.options.port) ? m.options.port : -1);
  if (m.port < 0)
    throw Error("grove serve: cannot listen on " + m.options.host + ":" + std::to_string(m.options.port) +
                " (address in use, or not an address of this machine)");
  return m.port;
}

void HttpListener::listen() { impl_->http.listen_after_bind(); }

void HttpListener::stop() {
  if (impl_->http.is_running()) impl_->http.stop();
}

}  // namespace grove::serve

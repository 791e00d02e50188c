#include "serve/http_listener.h"

#include <httplib.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "serve/connection_pool.h"
#include "serve/deadline_stream.h"
#include "serve/http_framing.h"
#include "serve/listener_drain.h"
#include "serve/raw_socket.h"

namespace grove::serve {
namespace {

using clock = std::chrono::steady_clock;

constexpr auto kFirstRequestGrace = std::chrono::seconds(1);

clock::duration seconds(double s) {
  return std::chrono::duration_cast<clock::duration>(std::chrono::duration<double>(s));
}

// "5", "0.3": for messages (std::to_string would say 5.000000).
std::string seconds_text(double s) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", s);
  return text;
}

// The kernel caps a listen backlog at net.core.somaxconn; httplib 0.11 asks for 5, so a burst
// of connections overflows the accept queue and clients see resets or SYN retries.
int system_backlog() {
  int n = 0;
  std::ifstream("/proc/sys/net/core/somaxconn") >> n;
  return n > 0 ? n : SOMAXCONN;
}

void set_error(httplib::Response& res, int status, const std::string& reason) {
  HttpResponse e = error_response(status, reason);
  res.status = e.status;
  res.set_content(e.body, e.content_type.c_str());
}

// One connection being served, as the handlers on its thread find it.
struct Connection {
  explicit Connection(int fd) : stream(fd) {}
  DeadlineStream stream;
  bool close_after = false;     // the request's body was left unread: the stream is out of step
  bool headers_parsed = false;  // this request's; until then a failure was in line or headers
};

}  // namespace

// httplib's Server with its connection loop replaced (process_and_close_socket is virtual):
// per-phase deadlines, a header size bound, and closing when a refusal leaves a body unread.
struct HttpListener::Impl : httplib::Server {
  Impl(InferenceServer& s, ListenOptions o, int64_t max_body) : server(s), options(std::move(o)), max_body_bytes(max_body) {}

  InferenceServer& server;
  ListenOptions options;
  int64_t max_body_bytes;
  int port = -1;
  ConnectionPool* pool = nullptr;  // set by new_task_queue before the first connection runs
  std::mutex connections_mutex;
  std::unordered_map<std::thread::id, Connection*> connections;  // each served on one thread

  // The connection this handler runs for (handlers get the request, not the socket).
  Connection* current() {
    std::lock_guard<std::mutex> lock(connections_mutex);
    auto it = connections.find(std::this_thread::get_id());
    return it == connections.end() ? nullptr : it->second;
  }
  void close_after_response() {
    if (Connection* c = current()) c->close_after = true;
  }
  // The response is about to be written, or a streamed response's next part: it gets
  // --io-timeout for it (a stream may last longer than one), and reads nothing.
  void extend_write_deadline() {
    if (Connection* c = current()) c->stream.start_phase(clock::now() + seconds(options.io_timeout_s), 0);
  }

  void read_and_answer(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& read);
  bool process_and_close_socket(socket_t sock) override;
  std::string answer_bytes(const std::string& input);
  void shed(int fd);
  // httplib listened with a backlog of 5; listening again on the bound socket raises it.
  bool raise_backlog(int backlog) { return ::listen(svr_sock_, backlog) == 0; }
  void drain_accept_queue();
};

namespace {

// `before_write` runs before each part of a streamed response (to give it a write deadline).
void answer(InferenceServer& server, const httplib::Request& req, std::string body, httplib::Response& res,
            const std::function<void()>& before_write) {
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
  if (!out.stream) {
    res.set_content(std::move(out.body), out.content_type.c_str());
    return;
  }
  const std::string content_type = out.content_type;  // `out` moves into the provider
  res.set_chunked_content_provider(
      content_type, [out = std::move(out), before_write](size_t, httplib::DataSink& sink) {
        auto write = [&](std::string_view part) {
          if (part.empty()) return true;  // an empty chunk would end the response
          before_write();
          return sink.write(part.data(), part.size());
        };
        if (write(out.body)) out.stream(write);
        sink.done();
        return true;
      });
}

}  // namespace

void HttpListener::Impl::read_and_answer(const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& read) {
  std::string body;
  // Without Content-Length or chunked encoding a request has no body (RFC 9112 6.3); httplib
  // would read until the client closes.
  if (has_body(req)) {
    if (req.has_header("Content-Length")) body.reserve(static_cast<size_t>(std::stoll(req.get_header_value("Content-Length"))));
    bool too_large = false;
    // Counted here because httplib 0.11 applies set_payload_max_length to Content-Length only,
    // not to a chunked body.
    bool complete = read([&](const char* data, size_t n) {
      if (static_cast<int64_t>(body.size() + n) > max_body_bytes) {
        too_large = true;
        return false;
      }
      body.append(data, n);
      return true;
    });
    if (!complete) {
      close_after_response();
      Connection* c = current();
      if (too_large)
        set_error(res, 413, "request body over the limit of " + std::to_string(max_body_bytes) + " bytes (--max-body-bytes)");
      else if (c && c->stream.failure() == DeadlineStream::Failure::timed_out)
        set_error(res, 408, "request body not received within " + seconds_text(options.io_timeout_s) + " s");
      else
        set_error(res, 400, "the request body could not be read (cut short, or malformed chunked encoding)");
      return;
    }
  }
  // A streamed response may last longer than --io-timeout: each part gets its own.
  answer(server, req, std::move(body), res, [this] { extend_write_deadline(); });
}

void HttpListener::Impl::shed(int fd) {
  // Read the request if it is already there, so that closing does not reset the connection
  // before the client reads the 503.
  drain(fd, std::chrono::milliseconds(10), std::chrono::milliseconds(10));
  send_raw(fd, 503,
           "server busy: " + std::to_string(std::max(options.max_held, options.http_threads)) +
               " connections held (--max-concurrent), retry later",
           std::chrono::milliseconds(100));
  lingering_close(fd, std::chrono::milliseconds(100));
}

bool HttpListener::Impl::process_and_close_socket(socket_t sock) {
  if (pool && pool->shedding()) {
    shed(sock);
    return true;
  }
  Connection conn(sock);
  {
    std::lock_guard<std::mutex> lock(connections_mutex);
    connections[std::this_thread::get_id()] = &conn;
  }
  const auto accepted = clock::now();
  int served = 0;
  // A connection accepted just before the stop may not have sent its request yet (a client
  // connects, then writes): it gets up to kFirstRequestGrace for it, instead of a close
  // without an answer. Kept-alive connections between requests stop at once.
  auto stopping = [&] {
    return svr_sock_ == INVALID_SOCKET && (served > 0 || clock::now() - accepted > kFirstRequestGrace);
  };
  // Headers parsed: the body gets its own deadline, and no header budget.
  auto headers_done = [&](httplib::Request&) {
    conn.headers_parsed = true;
    conn.stream.start_phase(clock::now() + seconds(options.io_timeout_s), SIZE_MAX);
  };
  bool linger = false;
  while (served < std::max(1, options.keep_alive_max)) {
    if (!conn.stream.wait_for_request(seconds(options.idle_timeout_s), stopping)) break;
    conn.stream.start_request();
    conn.headers_parsed = false;
    conn.stream.start_phase(clock::now() + seconds(options.header_timeout_s), options.max_header_bytes);
    const bool last = ++served >= options.keep_alive_max || stopping();
    bool client_closes = false;
    bool ok = process_request(conn.stream, last, client_closes, headers_done);
    const DeadlineStream::Failure failure = conn.stream.failure();
    if (failure != DeadlineStream::Failure::none && !conn.headers_parsed && conn.stream.written() == 0) {
      // httplib gave up on the request line without answering.
      bool slow = failure == DeadlineStream::Failure::timed_out;
      send_raw(sock, slow ? 408 : 431,
               slow ? "request headers not received within " + seconds_text(options.header_timeout_s) + " s"
                    : "request headers over " + std::to_string(options.max_header_bytes) + " bytes",
               std::chrono::seconds(1));
      linger = true;
      break;
    }
    if (conn.close_after) {
      linger = true;
      break;
    }
    if (!ok || client_closes || failure != DeadlineStream::Failure::none) break;
  }
  {
    std::lock_guard<std::mutex> lock(connections_mutex);
    connections.erase(std::this_thread::get_id());
  }
  if (linger) {
    lingering_close(sock, std::chrono::seconds(2));
  } else {
    ::shutdown(sock, SHUT_RDWR);
    ::close(sock);
  }
  return true;
}

namespace {

// A connection's bytes from a string, its answers into another: httplib's parser over
// memory, with no socket and no deadline.
class StringStream : public httplib::Stream {
 public:
  explicit StringStream(const std::string& in) : in_(in) {}
  bool is_readable() const override { return pos_ < in_.size(); }
  bool is_writable() const override { return true; }
  ssize_t read(char* ptr, size_t size) override {
    size_t n = std::min(size, in_.size() - pos_);
    std::memcpy(ptr, in_.data() + pos_, n);
    pos_ += n;
    return static_cast<ssize_t>(n);
  }
  ssize_t write(const char* ptr, size_t size) override {
    out.append(ptr, size);
    return static_cast<ssize_t>(size);
  }
  void get_remote_ip_and_port(std::string& ip, int& port) const override { ip = "127.0.0.1", port = 0; }
  void get_local_ip_and_port(std::string& ip, int& port) const override { ip = "127.0.0.1", port = 0; }
  socket_t socket() const override { return INVALID_SOCKET; }
  bool consumed() const { return pos_ >= in_.size(); }
  std::string out;

 private:
  const std::string& in_;
  size_t pos_ = 0;
};

}  // namespace

std::string HttpListener::Impl::answer_bytes(const std::string& input) {
  StringStream stream(input);
  Connection conn(-1);  // the handlers' state (close_after); its socket is never used
  {
    std::lock_guard<std::mutex> lock(connections_mutex);
    connections[std::this_thread::get_id()] = &conn;
  }
  for (int served = 0; served < std::max(1, options.keep_alive_max) && !stream.consumed();) {
    const bool last = ++served >= options.keep_alive_max;
    bool client_closes = false;
    bool ok = process_request(stream, last, client_closes, nullptr);
    if (!ok || client_closes || conn.close_after) break;
  }
  {
    std::lock_guard<std::mutex> lock(connections_mutex);
    connections.erase(std::this_thread::get_id());
  }
  return std::move(stream.out);
}

HttpListener::HttpListener(InferenceServer& server, ListenOptions options, int64_t max_body_bytes)
    : impl_(std::make_unique<Impl>(server, options, max_body_bytes)) {
  Impl& m = *impl_;
  const size_t threads = static_cast<size_t>(std::max(1, options.http_threads));
  const size_t held = static_cast<size_t>(std::max(1, options.max_held));
  m.new_task_queue = [&m, threads, held] {
    m.pool = new ConnectionPool(threads, held);
    return m.pool;
  };
  m.set_payload_max_length(static_cast<size_t>(max_body_bytes));
  // Without it a response written as header then body waits for the client's delayed ACK
  // (Nagle): about 40 ms added to every answer.
  m.set_tcp_nodelay(true);
  // The reads and writes themselves wait in DeadlineStream; these only bound a blocking call.
  auto io = static_cast<time_t>(std::max(1.0, options.io_timeout_s));
  m.set_read_timeout(io, 0);
  m.set_write_timeout(io, 0);
  // Only what the Keep-Alive response header says; the connection loop enforces them.
  m.set_keep_alive_max_count(static_cast<size_t>(std::max(1, options.keep_alive_max)));
  m.set_keep_alive_timeout(static_cast<time_t>(options.idle_timeout_s));

  m.set_pre_routing_handler([&m](const httplib::Request& req, httplib::Response& res) {
    if (std::optional<Refusal> r = refuse_before_body(req, m.max_body_bytes)) {
      m.close_after_response();
      set_error(res, r->status, r->reason);
      return httplib::Server::HandlerResponse::Handled;
    }
    // httplib does not read a GET's body: its bytes would be taken for the next request.
    if ((req.method == "GET" || req.method == "HEAD") && has_body(req)) m.close_after_response();
    return httplib::Server::HandlerResponse::Unhandled;
  });
  // curl and others wait for "100 Continue" before a large body: a refusal goes out instead,
  // and the body is never sent.
  m.set_expect_100_continue_handler([&m](const httplib::Request& req, httplib::Response& res) {
    std::optional<Refusal> r = refuse_before_body(req, m.max_body_bytes);
    if (!r) return 100;
    m.close_after_response();
    set_error(res, r->status, r->reason);
    return r->status;
  });
  auto with_body = [&m](const httplib::Request& req, httplib::Response& res, const httplib::ContentReader& read) {
    m.read_and_answer(req, res, read);
  };
  auto without_body = [&server, &m](const httplib::Request& req, httplib::Response& res) {
    answer(server, req, "", res, [&m] { m.extend_write_deadline(); });
  };
  m.Get(".*", without_body);
  m.Post(".*", with_body);
  m.Put(".*", with_body);
  m.Delete(".*", with_body);
  m.Patch(".*", with_body);
  m.set_exception_handler([](const httplib::Request&, httplib::Response& res, std::exception_ptr) {
    set_error(res, 500, "internal error while reading the request");
  });
  // httplib's own refusals (a malformed request, headers cut short) get a JSON body too, and
  // close the connection: httplib stopped reading somewhere inside the request.
  m.set_error_handler([&m](const httplib::Request&, httplib::Response& res) {
    if (!res.body.empty()) return;
    m.close_after_response();
    Connection* c = m.current();
    DeadlineStream::Failure failure = c ? c->stream.failure() : DeadlineStream::Failure::none;
    if (failure == DeadlineStream::Failure::timed_out)
      set_error(res, 408, "request headers not received within " + seconds_text(m.options.header_timeout_s) + " s");
    else if (failure == DeadlineStream::Failure::over_budget)
      set_error(res, 431, "request headers over " + std::to_string(m.options.max_header_bytes) + " bytes");
    else
      set_error(res, res.status, "HTTP error " + std::to_string(res.status));
  });
  // The response is about to be written: it gets its own deadline (the inference may have
  // taken the body's), and says so when the connection closes after it.
  m.set_post_routing_handler([&m](const httplib::Request&, httplib::Response& res) {
    Connection* c = m.current();
    if (!c) return;
    m.extend_write_deadline();
    if (c->close_after) {
      res.set_header("Connection", "close");
      res.headers.erase("Keep-Alive");
    }
  });
}

HttpListener::~HttpListener() { stop(); }

int HttpListener::bind() {
  Impl& m = *impl_;
  m.port = m.options.port == 0 ? m.bind_to_any_port(m.options.host.c_str())
                               : (m.bind_to_port(m.options.host.c_str(), m.options.port) ? m.options.port : -1);
  if (m.port < 0)
    throw Error("grove serve: cannot listen on " + m.options.host + ":" + std::to_string(m.options.port) +
                " (address in use, or not an address of this machine)");
  int backlog = m.options.listen_backlog > 0 ? m.options.listen_backlog : system_backlog();
  if (!m.raise_backlog(backlog))
    throw Error("grove serve: cannot set the listen backlog to " + std::to_string(backlog) + ": " + std::strerror(errno));
  return m.port;
}

void HttpListener::listen() { impl_->listen_after_bind(); }

std::string HttpListener::answer_bytes(const std::string& input) { return impl_->answer_bytes(input); }

// New connections are refused first, then httplib's accept loop takes every connection the
// kernel completed (see listener_drain.h), then the listening socket closes.
void HttpListener::Impl::drain_accept_queue() {
  if (!refuse_new_connections(svr_sock_)) return;
  wait_for_pending_connections(svr_sock_, port, std::chrono::seconds(1));
}

void HttpListener::stop() {
  if (!impl_->is_running()) return;
  impl_->drain_accept_queue();
  impl_->stop();
}

}  // namespace grove::serve

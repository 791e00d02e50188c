#pragma once
// InferenceServer behind a real socket (cpp-httplib): a pool of HTTP threads, each turning one
// request into InferenceServer::handle(). An inference waits on its future there while the
// engine's workers run its tiles, so HTTP threads are cheap waiters, not compute threads.
#include <memory>
#include <string>

#include "serve/inference_server.h"

namespace grove::serve {

struct ListenOptions {
  std::string host = "127.0.0.1";
  int port = 8000;             // 0: any free port (see HttpListener::port)
  int http_threads = 64;       // connections served at once (each keep-alive client holds one)
  // Connections held at once, served or waiting for an HTTP thread (at least http_threads);
  // one more is answered 503 at once instead of waiting in an unbounded queue.
  int max_held = 256;
  double idle_timeout_s = 5;    // a connection with no request under way is closed after this
  double header_timeout_s = 5;  // request line and headers must arrive within this, else 408
  double io_timeout_s = 30;     // the body must arrive within this (else 408); a response be written
  int keep_alive_max = 100;     // requests on one connection; the last is answered Connection: close
  size_t max_header_bytes = size_t{64} << 10;  // request line and headers; more get 431
  int listen_backlog = 0;       // 0: the system's maximum (/proc/sys/net/core/somaxconn)
};

class HttpListener {
 public:
  HttpListener(InferenceServer& server, ListenOptions options, int64_t max_body_bytes);
  ~HttpListener();
  // Binds; throws Error when the address is taken or invalid. Returns the port.
  int bind();
  // Serves until stop(); requests already accepted are answered before it returns.
  void listen();
  // From any thread (a signal watcher): stop accepting, finish what was accepted.
  void stop();
  // The bytes one connection sends, through the same parser, refusals and handlers as a
  // socket's but without one (no deadlines): what the server writes back. For fuzz_serve.
  std::string answer_bytes(const std::string& input);

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

}  // namespace grove::serve

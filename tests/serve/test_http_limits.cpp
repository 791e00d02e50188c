// The HTTP listener on a loopback port against clients that misbehave: every one gets an
// answer (or, if it never sends a request, a closed connection) without holding an HTTP
// thread for long, and no body is held past --max-body-bytes.
#include <gtest/gtest.h>

#include <memory>
#include <thread>
#include <vector>

#include "raw_client.h"
#include "serve/http_listener.h"
#include "serve_test_util.h"

namespace grove::serve {
namespace {

using test::body_of;
using test::RawClient;
using test::status_of;

constexpr int64_t kMaxBody = 1 << 20;
const std::string kAddBody = R"({"inputs": [{"name": "x", "shape": [2, 3], "datatype": "FP32", "data": [1, 2, 3, 4, 5, 6]}]})";
const std::string kLive = "GET /v2/health/live HTTP/1.1\r\nHost: t\r\n\r\n";

std::string post(const std::string& headers, const std::string& body) {
  return "POST /v2/models/add/infer HTTP/1.1\r\nHost: t\r\n" + headers + "\r\n" + body;
}

// A gzip member holding `data` in one stored (uncompressed) deflate block: what a client
// sends with Content-Encoding: gzip, without needing zlib here.
std::string gzip_stored(const std::string& data) {
  uint32_t crc = 0xffffffffu;
  for (unsigned char c : data) {
    crc ^= c;
    for (int k = 0; k < 8; ++k) crc = (crc >> 1) ^ (0xedb88320u & (0u - (crc & 1u)));
  }
  crc ^= 0xffffffffu;
  auto le = [](uint32_t v, int bytes) {
    std::string s;
    for (int i = 0; i < bytes; ++i) s += static_cast<char>((v >> (8 * i)) & 0xff);
    return s;
  };
  const auto n = static_cast<uint32_t>(data.size());
  return std::string("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\xff", 10) + '\x01' + le(n, 2) + le(~n & 0xffff, 2) + data + le(crc, 4) + le(n, 4);
}

class HttpLimits : public ::testing::Test {
 protected:
  HttpLimits() : models(engine, {}, repo.dir()), server(engine, models, {.max_body_bytes = kMaxBody}) {
    repo.write("add.onnx", test::add_model());
    models.load("add");
  }
  ~HttpLimits() override {
    if (!listener) return;
    listener->stop();
    thread.join();
  }

  // Short timeouts so that each test takes at most a few seconds.
  void start(ListenOptions o = {}) {
    o.host = "127.0.0.1";
    o.port = 0;
    if (o.idle_timeout_s == ListenOptions{}.idle_timeout_s) o.idle_timeout_s = 1;
    if (o.header_timeout_s == ListenOptions{}.header_timeout_s) o.header_timeout_s = 1;
    if (o.io_timeout_s == ListenOptions{}.io_timeout_s) o.io_timeout_s = 1;
    listener = std::make_unique<HttpListener>(server, o, kMaxBody);
    port = listener->bind();
    thread = std::thread([this] { listener->listen(); });
    // Answered once listen() runs; stop() before that would be lost.
    RawClient c(port);
    ASSERT_TRUE(c.send(kLive));
    ASSERT_EQ(status_of(c.read_response(5)), 200);
  }

  test::TempRepository repo;
  Engine engine{{.threads = 1}};
  ModelRepository models;
  InferenceServer server;
  std::unique_ptr<HttpListener> listener;
  std::thread thread;
  int port = 0;
};

TEST_F(HttpLimits, ServesAndKeepsAlive) {
  start();
  RawClient c(port);
  for (int i = 0; i < 3; ++i) {
    ASSERT_TRUE(c.send(post("Content-Length: " + std::to_string(kAddBody.size()) + "\r\n", kAddBody)));
    std::string r = c.read_response(5);
    ASSERT_EQ(status_of(r), 200) << r;
    EXPECT_NE(body_of(r).find("[2.0,4.0,6.0,5.0,7.0,9.0]"), std::string::npos) << r;
  }
}

TEST_F(HttpLimits, DeepJsonIsRefused) {
  start();
  std::string deep = R"({"inputs": [{"name": "x", "shape": [2, 3], "datatype": "FP32", "data": )" + std::string(60000, '[') + "1" +
                     std::string(60000, ']') + "}]}";
  RawClient c(port);
  ASSERT_TRUE(c.send(post("Content-Length: " + std::to_string(deep.size()) + "\r\n", deep)));
  std::string r = c.read_response(5);
  EXPECT_EQ(status_of(r), 400) << r;
  EXPECT_NE(body_of(r).find("max_json_depth"), std::string::npos) << r;
}

// A gzip body would be unpacked by httplib before any limit applies (1 MB to 1 GiB).
TEST_F(HttpLimits, CompressedBodyIsRefused) {
  start();
  std::string gz = gzip_stored(kAddBody);
  RawClient c(port);
  ASSERT_TRUE(c.send(post("Content-Encoding: gzip\r\nContent-Length: " + std::to_string(gz.size()) + "\r\n", gz)));
  std::string r = c.read_response(5);
  EXPECT_EQ(status_of(r), 415) << r;
  EXPECT_NE(body_of(r).find("Content-Encoding 'gzip' is not supported"), std::string::npos) << r;
  EXPECT_NE(r.find("Connection: close"), std::string::npos) << r;
}

// httplib 0.11 checks set_payload_max_length against Content-Length only: a chunked body was
// read whole. Here the client sends a little over the limit and stalls: the 413 must come
// without waiting for the rest.
TEST_F(HttpLimits, ChunkedBodyOverTheLimitIsCutOff) {
  start();
  RawClient c(port);
  ASSERT_TRUE(c.send(post("Transfer-Encoding: chunked\r\n", "")));
  std::string chunk(64 << 10, ' ');
  char size[16];
  std::snprintf(size, sizeof size, "%zx\r\n", chunk.size());
  for (int64_t sent = 0; sent <= kMaxBody; sent += static_cast<int64_t>(chunk.size()))
    ASSERT_TRUE(c.send(size + chunk + "\r\n"));
  std::string r = c.read_response(3);
  EXPECT_EQ(status_of(r), 413) << r;
  EXPECT_NE(body_of(r).find("over the limit of 1048576 bytes (--max-body-bytes)"), std::string::npos) << r;
}

// Over the limit by Content-Length: refused before the body, even when the client waits for
// 100 Continue, and not after reading (or skipping) the gigabyte.
TEST_F(HttpLimits, ContentLengthOverTheLimitIsRefusedFirst) {
  start();
  for (const char* expect : {"", "Expect: 100-continue\r\n"}) {
    RawClient c(port);
    ASSERT_TRUE(c.send(post(std::string(expect) + "Content-Length: 1073741824\r\n", "")));
    std::string r = c.read_response(2);
    EXPECT_EQ(status_of(r), 413) << expect << r;
    EXPECT_NE(body_of(r).find("1073741824 bytes is over the limit of 1048576"), std::string::npos) << r;
  }
}

// No Content-Length and no chunked encoding: no body, answered at once (httplib read until
// the client closed).
TEST_F(HttpLimits, PostWithoutLengthHasNoBody) {
  start();
  RawClient c(port);
  ASSERT_TRUE(c.send(post("", "")));
  std::string r = c.read_response(2);
  EXPECT_EQ(status_of(r), 400) << r;
  EXPECT_NE(body_of(r).find("empty request body"), std::string::npos) << r;
}

TEST_F(HttpLimits, OtherFramingIsRefused) {
  start();
  struct Case {
    std::string headers;
    int status;
    const char* words;
  };
  std::string long_header(70000, 'h');
  long_header.append(": x\r\n");
  for (const Case& k : {Case{"Transfer-Encoding: gzip, chunked\r\n", 501, "Transfer-Encoding 'gzip, chunked'"},
                        Case{"Content-Length: 12abc\r\n", 400, "Content-Length '12abc'"},
                        Case{"Content-Length: 3\r\nContent-Length: 3\r\n", 400, "more than one Content-Length"},
                        Case{long_header, 431, "request headers over 65536 bytes"}}) {
    RawClient c(port);
    c.send(post(k.headers, ""));
    std::string r = c.read_response(2);
    EXPECT_EQ(status_of(r), k.status) << r;
    EXPECT_NE(body_of(r).find(k.words), std::string::npos) << r;
  }
}

// One HTTP thread: a client dribbling its headers a byte at a time is cut off with 408 at the
// header timeout, and the next client is served.
TEST_F(HttpLimits, SlowHeadersDoNotHoldTheThread) {
  start({.http_threads = 1, .header_timeout_s = 0.3});
  RawClient slow(port);
  std::string slow_answer;
  std::thread dribble([&] {
    std::string headers = "GET /v2/health/live HTTP/1.1\r\n" + std::string(200, 'x');
    for (char ch : headers) {
      if (!slow.send(std::string(1, ch))) break;
      pollfd p{slow.fd(), POLLIN, 0};
      if (::poll(&p, 1, 20) > 0) break;  // answered (or closed)
    }
    slow_answer = slow.read_response(2);
  });
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  RawClient normal(port);
  auto t0 = std::chrono::steady_clock::now();
  ASSERT_TRUE(normal.send(kLive));
  EXPECT_EQ(status_of(normal.read_response(2)), 200);
  EXPECT_LT(std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count(), 1.5);
  dribble.join();
  EXPECT_EQ(status_of(slow_answer), 408) << slow_answer;
  EXPECT_NE(body_of(slow_answer).find("request headers not received within 0.3 s"), std::string::npos) << slow_answer;
}

// A client that connects and sends nothing is closed at the idle timeout.
TEST_F(HttpLimits, IdleConnectionIsClosed) {
  start({.http_threads = 1, .idle_timeout_s = 0.3});
  RawClient idle(port);
  std::this_thread::sleep_for(std::chrono::milliseconds(50));
  RawClient normal(port);
  ASSERT_TRUE(normal.send(kLive));
  EXPECT_EQ(status_of(normal.read_response(1.5)), 200);
  EXPECT_TRUE(idle.closed_within(1));
}

// A body that stops arriving gets 408 at the I/O timeout.
TEST_F(HttpLimits, StalledBodyTimesOut) {
  start({.io_timeout_s = 0.3});
  RawClient c(port);
  ASSERT_TRUE(c.send(post("Content-Length: 100\r\n", "{\"inputs\"")));
  std::string r = c.read_response(2);
  EXPECT_EQ(status_of(r), 408) << r;
  EXPECT_NE(body_of(r).find("request body not received within 0.3 s"), std::string::npos) << r;
}

// With every HTTP thread held and no room to wait, a new client is answered 503 at once
// instead of queueing.
TEST_F(HttpLimits, ConnectionsPastTheLimitAreShed) {
  start({.http_threads = 1, .max_held = 1, .idle_timeout_s = 3});
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // start()'s own client is gone
  RawClient holder(port);  // holds the only thread, waiting for a request
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  RawClient extra(port);
  ASSERT_TRUE(extra.send(kLive));
  std::string r = extra.read_response(1);
  EXPECT_EQ(status_of(r), 503) << r;
  EXPECT_NE(body_of(r).find("server busy"), std::string::npos) << r;
}

// A connection accepted before stop() and still waiting for a thread has its request answered
// (Connection: close), not dropped.
TEST_F(HttpLimits, RequestWaitingAtStopIsAnswered) {
  start({.http_threads = 1, .max_held = 2, .idle_timeout_s = 3});
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // start()'s own client is gone
  RawClient holder(port);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  RawClient waiting(port);
  ASSERT_TRUE(waiting.send(kLive));
  std::this_thread::sleep_for(std::chrono::milliseconds(100));
  listener->stop();
  std::string r = waiting.read_response(2);
  EXPECT_EQ(status_of(r), 200) << r;
  EXPECT_NE(r.find("Connection: close"), std::string::npos) << r;
}

// A client that connected just before stop() but writes its request a moment after it still
// gets an answer (within the first-request grace), not a connection closed unanswered.
TEST_F(HttpLimits, RequestSentJustAfterStopIsAnswered) {
  start();
  RawClient late(port);
  std::this_thread::sleep_for(std::chrono::milliseconds(100));  // accepted, its thread waiting
  listener->stop();
  std::this_thread::sleep_for(std::chrono::milliseconds(200));
  ASSERT_TRUE(late.send(kLive));
  std::string r = late.read_response(2);
  EXPECT_EQ(status_of(r), 200) << r;
  EXPECT_NE(r.find("Connection: close"), std::string::npos) << r;
}

// Clients connecting while the listener stops: each is refused at connect or answered, none
// reset (closing a listening socket resets the connections still in its accept queue; stop()
// lets the accept loop take them first).
TEST_F(HttpLimits, ClientsConnectingDuringStopAreAnsweredOrRefused) {
  start({.max_held = 1000});
  constexpr int kClients = 400;
  const std::string once = "GET /v2/health/live HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
  std::vector<std::unique_ptr<RawClient>> clients;
  std::thread stopper([&] {
    std::this_thread::sleep_for(std::chrono::milliseconds(2));
    listener->stop();
  });
  for (int i = 0; i < kClients; ++i) clients.push_back(std::make_unique<RawClient>(port, false));
  stopper.join();
  int answered = 0, refused = 0, unanswered = 0;
  for (auto& c : clients) {
    if (!c->finish_connect(3)) {
      ++refused;
      continue;
    }
    // A connect that completed only in the kernel may find the port closed when it writes.
    bool sent = c->send(once);
    std::string r = c->read_response(3);
    if (status_of(r) == 200) ++answered;
    else if (!sent || r.empty()) ++unanswered;
  }
  // One race is left: a client whose handshake's last ACK reaches the listener after stop()'s
  // filter went on believes it is connected, but the server never sees it (about 1 in 400 of
  // these clients, 2 ms after the stop, on a loaded 2-core machine). Without stop()'s drain
  // 21 of 400 went unanswered, so the bound still fails the old behaviour.
  EXPECT_LE(unanswered, kClients / 100) << answered << " answered, " << refused << " refused";
  EXPECT_EQ(answered + refused + unanswered, kClients);
}

// 500 clients connect at once, far past httplib's backlog of 5: each one is answered within
// seconds (an overflowing accept queue drops handshakes, which clients retry after 1 s, 3 s...,
// or resets them).
TEST_F(HttpLimits, BurstOfClientsAllAnswered) {
  start({.http_threads = 4, .max_held = 1000});
  constexpr int kClients = 500;
  const auto until = std::chrono::steady_clock::now() + std::chrono::seconds(4);
  auto left = [&] { return std::max(0.0, std::chrono::duration<double>(until - std::chrono::steady_clock::now()).count()); };
  std::vector<std::unique_ptr<RawClient>> clients;
  for (int i = 0; i < kClients; ++i) clients.push_back(std::make_unique<RawClient>(port, false));
  // Connection: close, or each kept-alive client would hold a thread for the idle timeout.
  const std::string once = "GET /v2/health/live HTTP/1.1\r\nHost: t\r\nConnection: close\r\n\r\n";
  int connected = 0, answered = 0;
  for (auto& c : clients) connected += c->finish_connect(left()) && c->send(once);
  for (auto& c : clients) answered += status_of(c->read_response(left())) == 200;
  EXPECT_EQ(connected, kClients);
  EXPECT_EQ(answered, kClients);
}

}  // namespace
}  // namespace grove::serve

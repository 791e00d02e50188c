#include "serve/listener_drain.h"

#include <linux/filter.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <sys/socket.h>

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <string>
#include <thread>

namespace grove::serve {
namespace {

// Connections of local port `port` in state SYN_RECV (the server's SYN-ACK sent, the client's
// ACK not yet in), from /proc/net/tcp and tcp6; -1 when neither can be read.
int half_open(int port) {
  int count = -1;
  for (const char* path : {"/proc/net/tcp", "/proc/net/tcp6"}) {
    std::ifstream table(path);
    if (!table) continue;
    count = std::max(count, 0);
    std::string line;
    std::getline(table, line);  // the column names
    while (std::getline(table, line)) {
      // "  3: 0100007F:1F90 00000000:0000 03 ...": slot, local address:port, remote, state.
      char local[64], remote[64];
      unsigned local_port = 0, state = 0;
      if (std::sscanf(line.c_str(), " %*d: %63[0-9A-Fa-f]:%x %63[0-9A-Fa-f]:%*x %x", local, &local_port, remote,
                      &state) == 4 &&
          static_cast<int>(local_port) == port && state == 0x03)
        ++count;
    }
  }
  return count;
}

// Connections completed by the kernel and not yet accepted (a listener's tcpi_unacked).
int accept_queue(int fd) {
  tcp_info info{};
  socklen_t len = sizeof info;
  if (::getsockopt(fd, IPPROTO_TCP, TCP_INFO, &info, &len) != 0) return 0;
  return static_cast<int>(info.tcpi_unacked);
}

}  // namespace

bool refuse_new_connections(int fd) {
  // The filter sees a TCP segment from its header on: byte 13 holds the flags.
  constexpr unsigned kSyn = 0x02, kAck = 0x10;
  sock_filter drop_syn[] = {
      {BPF_LD | BPF_B | BPF_ABS, 0, 0, 13},
      {BPF_ALU | BPF_AND | BPF_K, 0, 0, kSyn | kAck},
      {BPF_JMP | BPF_JEQ | BPF_K, 0, 1, kSyn},
      {BPF_RET | BPF_K, 0, 0, 0},           // a SYN alone: dropped
      {BPF_RET | BPF_K, 0, 0, 0xffffffffu},  // anything else: kept whole
  };
  sock_fprog program{static_cast<unsigned short>(sizeof drop_syn / sizeof drop_syn[0]), drop_syn};
  return fd >= 0 && ::setsockopt(fd, SOL_SOCKET, SO_ATTACH_FILTER, &program, sizeof program) == 0;
}

void wait_for_pending_connections(int fd, int port, std::chrono::steady_clock::duration limit) {
  using clock = std::chrono::steady_clock;
  const auto start = clock::now();
  // Without /proc the handshakes under way cannot be seen: they get a fixed grace, which
  // covers a loopback or data-centre round trip.
  const auto blind_grace = std::chrono::milliseconds(50);
  for (;;) {
    const int handshakes = half_open(port);
    const bool settled = handshakes == 0 || (handshakes < 0 && clock::now() - start >= blind_grace);
    if ((settled && accept_queue(fd) == 0) || clock::now() - start > limit) return;
    std::this_thread::sleep_for(std::chrono::milliseconds(1));
  }
}

}  // namespace grove::serve

#pragma once
// Stopping a listener without resetting a connection the client already made. Closing a
// listening socket resets every connection whose handshake the kernel has started or finished
// but the server has not accepted: their clients sent a request and read a reset, not an answer.
#include <chrono>

namespace grove::serve {

// Makes the kernel ignore new connection attempts (a SYN without ACK) on listening socket `fd`,
// while handshakes already under way finish into the accept queue. An ignored SYN is retried by
// the client, and the retry finds the port closed: refused, which a client can tell apart from
// a lost answer. Only SYNs are dropped: connections cloned from the listener inherit the filter,
// and one that dropped everything would lose their requests. False when it cannot be attached.
bool refuse_new_connections(int fd);

// Waits until listening socket `fd` (bound to `port`) has no connection half-way through its
// handshake and none waiting in its accept queue (the accept loop keeps taking them), or until
// `limit`: a client that vanished mid-handshake is waited for no longer than that.
void wait_for_pending_connections(int fd, int port, std::chrono::steady_clock::duration limit);

}  // namespace grove::serve

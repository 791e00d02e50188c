#pragma once
// Answers and closes written straight to a connection's socket, for connections httplib is not
// serving (shed at the door) or has given up on (a request line that never finished).
#include <chrono>
#include <string>

namespace grove::serve {

// An HTTP/1.1 answer with {"error": reason} and Connection: close (408, 431 or 503), written
// within `timeout` or not at all.
void send_raw(int fd, int status, const std::string& reason, std::chrono::steady_clock::duration timeout);

// Reads and drops what the client sends until it closes, sends nothing for `quiet`, or
// `limit` passes.
void drain(int fd, std::chrono::steady_clock::duration limit, std::chrono::steady_clock::duration quiet);

// Closing a socket with unread bytes sends a reset, which can destroy the answer before the
// client reads it. So when the server stops reading mid-request (a refusal, a timeout), it
// finishes writing, then drops what still arrives while the client keeps sending (a pause of
// 0.1 s ends it, so a client that stalls does not hold the thread), before closing.
void lingering_close(int fd, std::chrono::steady_clock::duration limit);

}  // namespace grove::serve

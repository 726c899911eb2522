// The connections of a BoundedServer, served without a thread each while
// they wait: a browser keeps several connections open between its requests,
// and a client may open many and send nothing. Each such connection held
// one of the server's threads until its timeout, so a few of them kept
// every other request waiting. Here one thread watches every connection
// that waits for a request (poll), and a fixed set of workers serves those
// whose bytes have come.
//
// - A connection waits at most `idle_timeout` for its next request (or its
//   first), then it is closed. The watcher reads a request as it comes,
//   its head and the body its Content-Length declares (up to `max_body`
//   bytes), and hands the connection to a worker once both are whole: a
//   client that drips its request holds no worker either, and is closed
//   when the request has not come whole `idle_timeout` after its first
//   byte. A body that is refused unread (too large, chunked) goes to a
//   worker with its head, and so does one whose client waits for
//   "100 Continue" before it sends it: the worker answers that and reads
//   the body itself, within the server's own timeout.
// - Past `max_open` connections, the one that has waited longest is closed
//   to make room: a flood of idle connections cannot lock out a client that
//   sends its request at once.
// - stop() closes the waiting connections, lets each worker finish the
//   request it serves, and joins the threads; connections handed to park()
//   after it are closed.
//
// Thread-safety: park() and stop() may be called from any thread.
#pragma once

#include <sys/types.h>
#include <atomic>
#include <chrono>
#include <condition_variable>
#include <cstddef>
#include <deque>
#include <functional>
#include <memory>
#include <mutex>
#include <string>
#include <thread>
#include <vector>

namespace ratchet::cli {

// cpp-httplib parses a form-encoded body only up to this size, and
// answers 413 past it (CPPHTTPLIB_FORM_URL_ENCODED_PAYLOAD_MAX_LENGTH): such
// a body is refused before it is read.
inline constexpr std::size_t kMaxFormBody = 8192;

// What a connection received and no request has read yet: a client may
// send its next request (pipelined) with the one before, and those bytes
// belong to the next request's stream; the pool gathers a request here
// before a worker reads it.
struct Unread {
  std::string bytes;
  std::size_t off = 0;
  bool empty() const { return off == bytes.size(); }
  // Whether a whole request is here, so that a worker has something to
  // answer at once: a head (up to its empty line) and the body its
  // Content-Length declares, or a head whose body the worker refuses or
  // reads itself (over `max_body`, a form over kMaxFormBody, chunked, after
  // "100 Continue"), or more than any head may take.
  bool has_request(std::size_t max_body) const;
  // Reads what `fd` has now, up to `at_most` bytes held; the bytes read,
  // 0 at the end of the connection, -1 when nothing was there or it failed.
  ssize_t receive(int fd, std::size_t at_most);
};

// One client's connection; closes its socket when destroyed.
class ServerConnection {
 public:
  ServerConnection(int fd, std::size_t requests) : requests_left(requests), fd_(fd) {}
  ~ServerConnection();
  ServerConnection(const ServerConnection&) = delete;
  ServerConnection& operator=(const ServerConnection&) = delete;

  int fd() const { return fd_; }

  std::size_t requests_left;  // before the connection is closed (keep-alive's maximum)
  Unread unread;

 private:
  friend class ConnectionPool;
  int fd_;
  std::chrono::steady_clock::time_point waits_since_{};  // for a request, or for the rest of its head
  std::atomic<std::size_t>* open_ = nullptr;             // the pool's count, while it counts this one
};

class ConnectionPool {
 public:
  // Serves a connection whose bytes have come (or that closed) on a worker
  // thread; it goes back with park() or ends when destroyed.
  using Serve = std::function<void(std::unique_ptr<ServerConnection>)>;

  ConnectionPool(std::size_t workers, std::size_t max_open, std::chrono::milliseconds idle_timeout,
                 std::size_t max_body, Serve serve);
  ~ConnectionPool();
  ConnectionPool(const ConnectionPool&) = delete;
  ConnectionPool& operator=(const ConnectionPool&) = delete;

  // A connection waiting for its next request, or a new one for its first.
  void park(std::unique_ptr<ServerConnection> c);
  void stop();
  bool stopping() const { return stopping_.load(std::memory_order_acquire); }

 private:
  void watch_loop();
  void work_loop();
  void wake_watcher();

  const std::size_t max_open_;
  const std::chrono::milliseconds idle_timeout_;
  const std::size_t max_body_;
  const Serve serve_;
  std::atomic<std::size_t> open_{0};
  std::atomic<bool> stopping_{false};
  int wake_fd_ = -1;  // an eventfd: a connection was parked, or stop()

  std::mutex mu_;
  std::condition_variable ready_cv_;
  std::vector<std::unique_ptr<ServerConnection>> arriving_;  // parked, not yet watched
  std::deque<std::unique_ptr<ServerConnection>> ready_;      // bytes came: for a worker

  std::vector<std::unique_ptr<ServerConnection>> waiting_;  // the watcher's own
  std::thread watcher_;
  std::vector<std::thread> workers_;
};

}  // namespace ratchet::cli

#include "connection_pool.hpp"

#include <poll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <charconv>
#include <cstdint>
#include <optional>
#include <string_view>

namespace ratchet::cli {

using SteadyClock = std::chrono::steady_clock;

namespace {

// More than any request head may take (cpp-httplib refuses a line over
// 8 KiB, and a head of many of them): handed to a worker, which refuses it.
constexpr std::size_t kMaxHead = 64 * 1024;

}  // namespace

namespace {

// Where a whole head (up to its empty line) ends in `rest`, past the blank
// lines parsers skip before a request line; npos while it is not whole.
std::size_t head_end(std::string_view rest) {
  const std::size_t start = rest.find_first_not_of("\r\n");
  if (start == std::string_view::npos) return std::string_view::npos;
  const std::size_t crlf = rest.find("\n\r\n", start);
  const std::size_t lf = rest.find("\n\n", start);
  if (crlf == std::string_view::npos && lf == std::string_view::npos) return std::string_view::npos;
  return crlf < lf ? crlf + 3 : lf + 2;
}

bool same_name(std::string_view a, std::string_view b) {
  return a.size() == b.size() && std::ranges::equal(a, b, [](char x, char y) {
           return std::tolower(static_cast<unsigned char>(x)) == std::tolower(static_cast<unsigned char>(y));
         });
}

std::string_view trimmed(std::string_view v) {
  const std::size_t a = v.find_first_not_of(" \t\r");
  if (a == std::string_view::npos) return {};
  return v.substr(a, v.find_last_not_of(" \t\r") - a + 1);
}

// The body bytes a whole head says follow it: its Content-Length, zero
// without one. Nothing when the pool should not wait for them: a chunked
// body, a length that is not one whole number, a form-encoded body over
// kMaxFormBody (all refused unread), or a client that waits for
// "100 Continue" before it sends its body. The worker answers those.
std::optional<std::size_t> body_to_gather(std::string_view head) {
  std::optional<std::size_t> length;
  bool form = false;
  std::size_t line_start = head.find('\n');  // past the request line
  while (line_start != std::string_view::npos && line_start + 1 < head.size()) {
    const std::size_t next = head.find('\n', line_start + 1);
    const std::string_view line = head.substr(
        line_start + 1, next == std::string_view::npos ? std::string_view::npos : next - line_start - 1);
    line_start = next;
    const std::size_t colon = line.find(':');
    if (colon == std::string_view::npos) continue;
    const std::string_view name = trimmed(line.substr(0, colon));
    if (same_name(name, "Transfer-Encoding") || same_name(name, "Expect")) return std::nullopt;
    const std::string_view value = trimmed(line.substr(colon + 1));
    if (same_name(name, "Content-Type")) form = value.starts_with("application/x-www-form-urlencoded");
    if (!same_name(name, "Content-Length")) continue;
    std::size_t n = 0;
    const auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (value.empty() || ec != std::errc{} || end != value.data() + value.size() ||
        (length && *length != n)) {
      return std::nullopt;
    }
    length = n;
  }
  if (form && length > kMaxFormBody) return std::nullopt;
  return length.value_or(0);
}

}  // namespace

bool Unread::has_request(std::size_t max_body) const {
  const std::string_view rest = std::string_view(bytes).substr(off);
  const std::size_t end = head_end(rest);
  if (end == std::string_view::npos) return rest.size() >= kMaxHead;
  const std::optional<std::size_t> body = body_to_gather(rest.substr(0, end));
  // A body refused unread, or one the worker must read itself.
  if (!body || *body > max_body) return true;
  return rest.size() - end >= *body;
}

ssize_t Unread::receive(int fd, std::size_t at_most) {
  if (off > 0) {
    bytes.erase(0, off);
    off = 0;
  }
  char buffer[4096];
  const std::size_t room = at_most > bytes.size() ? at_most - bytes.size() : 0;
  if (room == 0) return -1;
  const ssize_t n = ::recv(fd, buffer, std::min(room, sizeof buffer), MSG_DONTWAIT);
  if (n > 0) bytes.append(buffer, static_cast<std::size_t>(n));
  return n;
}

ServerConnection::~ServerConnection() {
  if (fd_ >= 0) ::close(fd_);
  if (open_ != nullptr) open_->fetch_sub(1, std::memory_order_relaxed);
}

ConnectionPool::ConnectionPool(std::size_t workers, std::size_t max_open,
                               std::chrono::milliseconds idle_timeout, std::size_t max_body, Serve serve)
    : max_open_(std::max<std::size_t>(1, max_open)),
      idle_timeout_(idle_timeout),
      max_body_(max_body),
      serve_(std::move(serve)),
      wake_fd_(::eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC)) {
  watcher_ = std::thread([this] { watch_loop(); });
  for (std::size_t i = 0; i < std::max<std::size_t>(1, workers); ++i) {
    workers_.emplace_back([this] { work_loop(); });
  }
}

ConnectionPool::~ConnectionPool() {
  stop();
  if (wake_fd_ >= 0) ::close(wake_fd_);
}

void ConnectionPool::wake_watcher() {
  const std::uint64_t one = 1;
  // A full counter already wakes the watcher: nothing is lost when it fails.
  [[maybe_unused]] const ssize_t n = ::write(wake_fd_, &one, sizeof one);
}

void ConnectionPool::park(std::unique_ptr<ServerConnection> c) {
  if (stopping()) return;  // closed
  if (c->open_ == nullptr) {
    c->open_ = &open_;
    open_.fetch_add(1, std::memory_order_relaxed);
  }
  c->waits_since_ = SteadyClock::now();
  {
    std::lock_guard lock(mu_);
    arriving_.push_back(std::move(c));
  }
  wake_watcher();
}

void ConnectionPool::stop() {
  stopping_.store(true, std::memory_order_release);
  wake_watcher();
  ready_cv_.notify_all();
  if (watcher_.joinable()) watcher_.join();
  for (auto& w : workers_) {
    if (w.joinable()) w.join();
  }
  std::lock_guard lock(mu_);
  arriving_.clear();
  ready_.clear();
}

void ConnectionPool::watch_loop() {
  std::vector<pollfd> fds;
  while (!stopping()) {
    {
      std::lock_guard lock(mu_);
      for (auto& c : arriving_) waiting_.push_back(std::move(c));
      arriving_.clear();
    }
    // Room for the newest: the connections that waited longest go first.
    if (open_.load(std::memory_order_relaxed) > max_open_ && !waiting_.empty()) {
      std::ranges::stable_sort(waiting_, {}, [](const auto& c) { return c->waits_since_; });
      std::size_t over = open_.load(std::memory_order_relaxed) - max_open_;
      const std::size_t n = std::min(over, waiting_.size());
      waiting_.erase(waiting_.begin(), waiting_.begin() + static_cast<std::ptrdiff_t>(n));
    }
    const auto now = SteadyClock::now();
    std::erase_if(waiting_, [&](const auto& c) { return now - c->waits_since_ >= idle_timeout_; });
    auto next = now + idle_timeout_;
    fds.clear();
    fds.push_back({wake_fd_, POLLIN, 0});
    for (const auto& c : waiting_) {
      fds.push_back({c->fd(), POLLIN, 0});
      next = std::min(next, c->waits_since_ + idle_timeout_);
    }
    const auto wait = std::chrono::ceil<std::chrono::milliseconds>(next - now);
    const int n = ::poll(fds.data(), fds.size(), static_cast<int>(std::max<std::int64_t>(0, wait.count())));
    if (n < 0 && errno != EINTR) break;
    if (n <= 0) continue;
    if (fds[0].revents != 0) {
      std::uint64_t count = 0;
      [[maybe_unused]] const ssize_t r = ::read(wake_fd_, &count, sizeof count);
    }
    // A request as it comes; a worker once it is whole.
    std::vector<std::unique_ptr<ServerConnection>> ready;
    std::size_t kept = 0;
    const auto read_at = SteadyClock::now();
    for (std::size_t i = 0; i < waiting_.size(); ++i) {
      auto& c = waiting_[i];
      if (fds[i + 1].revents != 0) {
        const bool had_bytes = !c->unread.empty();
        const ssize_t got = c->unread.receive(c->fd(), kMaxHead + max_body_);
        if (got == 0 || (got < 0 && errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR)) {
          c.reset();  // the client went away
          continue;
        }
        if (c->unread.has_request(max_body_)) {
          ready.push_back(std::move(c));
          continue;
        }
        // The request's first bytes: it must be whole within the timeout
        // from now.
        if (!had_bytes && got > 0) c->waits_since_ = read_at;
      }
      waiting_[kept++] = std::move(c);
    }
    waiting_.resize(kept);
    if (!ready.empty()) {
      {
        std::lock_guard lock(mu_);
        for (auto& c : ready) ready_.push_back(std::move(c));
      }
      if (ready.size() == 1) {
        ready_cv_.notify_one();
      } else {
        ready_cv_.notify_all();
      }
    }
  }
  waiting_.clear();
}

void ConnectionPool::work_loop() {
  while (true) {
    std::unique_ptr<ServerConnection> c;
    {
      std::unique_lock lock(mu_);
      ready_cv_.wait(lock, [&] { return stopping() || !ready_.empty(); });
      if (stopping()) return;
      c = std::move(ready_.front());
      ready_.pop_front();
    }
    serve_(std::move(c));
  }
}

}  // namespace ratchet::cli

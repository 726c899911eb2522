#include "store/postgres/listener.hpp"

#include <libpq-fe.h>
#include <poll.h>

#include <cerrno>
#include <memory>
#include <system_error>

namespace ratchet::store::pg {
namespace {

PgError lost(const Connection& conn, std::string_view why) {
  return {Error::database("PostgreSQL " + conn.target() + ": waiting for notifications: " + std::string(why) +
                          ". The connection must be reset or opened again, then LISTEN again"),
          std::string(kSqlstateConnectionFailure)};
}

// The oldest notification libpq has read, if any.
std::optional<Notification> take_notification(pg_conn* c) {
  std::unique_ptr<PGnotify, decltype(&PQfreemem)> n(PQnotifies(c), &PQfreemem);
  if (!n) return std::nullopt;
  return Notification{n->relname, n->extra == nullptr ? "" : n->extra, n->be_pid};
}

}  // namespace

PgStatus listen(Connection& conn, std::string_view channel) {
  auto done = conn.exec("LISTEN " + conn.quote_identifier(channel));
  if (!done) return std::unexpected(std::move(done.error()));
  return {};
}

PgStatus unlisten(Connection& conn, std::string_view channel) {
  auto done = conn.exec("UNLISTEN " + conn.quote_identifier(channel));
  if (!done) return std::unexpected(std::move(done.error()));
  return {};
}

PgResult<std::optional<Notification>> wait_for_notification(Connection& conn,
                                                            std::chrono::milliseconds timeout) {
  pg_conn* c = conn.native();
  const auto deadline = std::chrono::steady_clock::now() + timeout;
  while (true) {
    // Statements run since the last wait may have queued some already.
    if (auto n = take_notification(c)) return n;
    if (PQstatus(c) == CONNECTION_BAD) return std::unexpected(lost(conn, "the connection is lost"));
    const int fd = PQsocket(c);
    if (fd < 0) return std::unexpected(lost(conn, "the connection has no socket"));
    const auto left =
        std::chrono::duration_cast<std::chrono::milliseconds>(deadline - std::chrono::steady_clock::now());
    if (left.count() <= 0) return std::optional<Notification>();
    pollfd pfd{fd, POLLIN, 0};
    const int ready = ::poll(&pfd, 1, static_cast<int>(left.count()));
    if (ready < 0) {
      if (errno == EINTR) continue;
      return std::unexpected(lost(conn, "poll failed: " + std::generic_category().message(errno)));
    }
    if (ready == 0) return std::optional<Notification>();
    if (PQconsumeInput(c) == 0) return std::unexpected(lost(conn, "the server closed the connection"));
  }
}

PgStatus notify(Connection& conn, std::string_view channel, std::string_view payload) {
  auto done = conn.exec_params("SELECT pg_notify($1, $2)", {std::string(channel), std::string(payload)});
  if (!done) return std::unexpected(std::move(done.error()));
  return {};
}

}  // namespace ratchet::store::pg

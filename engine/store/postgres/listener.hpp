// LISTEN/NOTIFY on a Connection: wake a waiting worker as soon as another
// session announces work, instead of polling the job table.
//
// A listening connection should do nothing else while it waits; it is used
// by one thread at a time like any Connection. Notifications that arrive
// while it runs statements are kept and returned by the next wait.
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <string_view>

#include "store/postgres/connection.hpp"
#include "store/postgres/error.hpp"

namespace ratchet::store::pg {

struct Notification {
  std::string channel;
  std::string payload;
  int sender_pid = 0;  // the server process of the notifying session
};

// Subscribes `conn` to `channel` (any text: it is quoted as an identifier,
// so the name is exact and case-sensitive, as pg_notify() expects).
PgStatus listen(Connection& conn, std::string_view channel);
PgStatus unlisten(Connection& conn, std::string_view channel);

// Waits up to `timeout` for a notification on the channels `conn` listens
// to; nullopt when none came. An error means the connection is lost
// (needs_reconnect(); LISTEN again after reset()).
PgResult<std::optional<Notification>> wait_for_notification(Connection& conn,
                                                            std::chrono::milliseconds timeout);

// Sends `payload` to the listeners of `channel`; delivered when the
// transaction of `conn` commits (at once outside a transaction).
PgStatus notify(Connection& conn, std::string_view channel, std::string_view payload);

}  // namespace ratchet::store::pg

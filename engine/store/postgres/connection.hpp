// One session with a PostgreSQL server through libpq: connecting with
// clear errors, simple and parameterised statements, prepared statements,
// and noticing and repairing a lost connection (a restart or failover).
//
// Passwords: a URL normally carries none; libpq then reads PGPASSWORD, the
// password file (PGPASSFILE, default ~/.pgpass) itself. A password the
// caller resolved elsewhere (a ${NAME} configuration value) is handed to
// libpq as a separate keyword, never spliced into a connection string that
// could end up in a log. No message of this component contains the
// connection's password (libpq's text is scrubbed of it); messages do show
// the start of a failed statement, so secrets go in as parameters, which
// are never shown.
//
// Ownership and threads: a Connection owns its libpq connection and closes
// it on destruction. It is used by one thread at a time (a Pool hands
// connections to threads); distinct connections are independent.
#pragma once

#include <chrono>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "store/postgres/error.hpp"
#include "store/postgres/rows.hpp"

struct pg_conn;  // libpq's PGconn; only store/postgres includes libpq

namespace ratchet::store::pg {

struct ConnectOptions {
  // postgresql://user@host:port/db?param=value, or libpq's key=value form.
  std::string url;
  // A password from somewhere other than libpq's own sources (which are
  // used when this is empty); it overrides one in the URL.
  std::optional<std::string> password;
  std::chrono::seconds connect_timeout{10};
  // The longest any statement waits for a lock (SET lock_timeout, again
  // after each reset); zero: no bound. A table another session holds
  // locked otherwise hangs a statement, and the process with it, until that
  // session lets go.
  std::chrono::milliseconds lock_timeout{0};
};

// A text-format statement parameter; nullopt binds SQL NULL.
using Param = std::optional<std::string>;
using Params = std::vector<Param>;

class Connection {
 public:
  Connection(Connection&&) noexcept = default;
  Connection& operator=(Connection&&) noexcept = default;
  ~Connection() = default;

  // Runs one or more statements without parameters (DDL, BEGIN, ...).
  PgResult<Rows> exec(const std::string& sql);
  // Runs one statement with $1, $2, ... bound to `params`; values never
  // become part of the SQL text, so no quoting is needed.
  PgResult<Rows> exec_params(const std::string& sql, const Params& params);

  // Prepares `sql` under `name` for exec_prepared. Preparing the same name
  // with the same SQL again is a no-op; after reset() statements are
  // prepared again when next used.
  PgStatus prepare(const std::string& name, const std::string& sql, int nparams);
  PgResult<Rows> exec_prepared(const std::string& name, const Params& params);

  // True when the connection is lost; also notices a server that closed an
  // idle connection (restart, failover) before the next statement fails.
  bool is_broken();
  // Connects again with the same settings; prepared statements survive.
  PgStatus reset();

  // True unless a transaction is open or failed on this connection.
  bool idle_in_no_transaction() const noexcept;

  // "user@host:port/database", for messages.
  const std::string& target() const noexcept { return target_; }
  // `name` as a double-quoted SQL identifier (for LISTEN, table names).
  std::string quote_identifier(std::string_view name) const;

  // For the other parts of store/postgres (listener), which speak libpq.
  pg_conn* native() const noexcept { return conn_.get(); }

 private:
  friend PgResult<Connection> connect(const ConnectOptions& options);
  struct Finish {
    void operator()(pg_conn* c) const noexcept;
  };
  struct Prepared {
    std::string sql;
    int nparams = 0;
  };

  Connection(pg_conn* conn, bool explicit_password, std::chrono::milliseconds lock_timeout);
  // Settings each session of this connection starts with (lock_timeout).
  PgStatus set_up_session();
  PgResult<Rows> take(pg_result* result, std::string_view doing);
  PgError error_here(std::string_view doing, std::string message, std::string sqlstate) const;
  PgStatus prepare_in_session(const std::string& name, const Prepared& statement);

  std::unique_ptr<pg_conn, Finish> conn_;
  std::string target_;
  // Whether the password came from ConnectOptions, for reconnect errors.
  bool explicit_password_ = false;
  std::chrono::milliseconds lock_timeout_{0};
  std::map<std::string, Prepared, std::less<>> prepared_;
  // The names prepared in the current session (a reset starts a new one).
  std::set<std::string, std::less<>> session_prepared_;
};

// Opens a connection; the error says what failed (server unreachable,
// password refused or missing, no such database), where and how to fix it.
// `connect_timeout` is kept on the monotonic clock: libpq times it on the
// wall clock, so a step forward (an NTP step at boot) ends a connect that
// was under way; such an attempt is made again, up to kConnectTries times.
PgResult<Connection> connect(const ConnectOptions& options);
inline constexpr int kConnectTries = 3;

}  // namespace ratchet::store::pg

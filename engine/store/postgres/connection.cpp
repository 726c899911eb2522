#include "store/postgres/connection.hpp"

#include <libpq-fe.h>

#include <spdlog/spdlog.h>

#include <algorithm>
#include <cctype>
#include <chrono>
#include <string_view>
#include <utility>

#include "store/postgres/connect_error.hpp"
#include "store/postgres/url.hpp"

namespace ratchet::store::pg {
namespace {

constexpr std::size_t kShownSqlChars = 80;

// What a server says outside any statement (a NOTICE, or the FATAL that ends
// a session on a restart or pg_terminate_backend): libpq printed it to
// stderr as is, a bare line in the middle of the log (and of JSON logs).
// It goes through the log instead, at the level its severity calls for.
void log_server_message(void* target, const char* message) {
  std::string text = one_line(message == nullptr ? "" : message);
  std::string severity;
  if (const std::size_t colon = text.find(':'); colon != std::string::npos && colon < 10) {
    severity = text.substr(0, colon);
    text = one_line(text.substr(colon + 1));
  }
  const std::string from = describe_target(static_cast<const pg_conn*>(target));
  if (severity == "NOTICE" || severity == "INFO" || severity == "DEBUG" || severity == "LOG") {
    spdlog::debug("PostgreSQL {} said: {}", from, text);
  } else {
    std::string lower = severity;
    std::ranges::transform(lower, lower.begin(),
                           [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
    spdlog::warn("PostgreSQL {} said{}: {}", from, lower.empty() ? "" : " (" + lower + ")", text);
  }
}

// The start of a statement, on one line, to say which one failed.
std::string shown_sql(std::string_view sql) {
  std::string out;
  for (const char ch : sql.substr(0, kShownSqlChars)) {
    const bool space = ch == '\n' || ch == '\r' || ch == '\t' || ch == ' ';
    if (space && (out.empty() || out.back() == ' ')) continue;
    out += space ? ' ' : ch;
  }
  if (sql.size() > kShownSqlChars) out += "...";
  return "statement \"" + out + "\"";
}

std::string field(const PGresult* result, int code) {
  const char* value = PQresultErrorField(result, code);
  return value == nullptr ? std::string() : std::string(value);
}

// Values as libpq wants them: text, with a null pointer for NULL.
std::vector<const char*> values_of(const Params& params) {
  std::vector<const char*> values;
  values.reserve(params.size());
  for (const Param& p : params) values.push_back(p ? p->c_str() : nullptr);
  return values;
}

}  // namespace

void Connection::Finish::operator()(pg_conn* c) const noexcept { PQfinish(c); }

Connection::Connection(pg_conn* conn, bool explicit_password, std::chrono::milliseconds lock_timeout)
    : conn_(conn),
      target_(describe_target(conn)),
      explicit_password_(explicit_password),
      lock_timeout_(lock_timeout) {}

PgStatus Connection::set_up_session() {
  // The PGconn, not this object, which moves: PQreset keeps both.
  PQsetNoticeProcessor(conn_.get(), &log_server_message, conn_.get());
  if (lock_timeout_.count() <= 0) return {};
  auto set = exec("SET lock_timeout = '" + std::to_string(lock_timeout_.count()) + "ms'");
  if (!set) return std::unexpected(set.error());
  return {};
}

PgError Connection::error_here(std::string_view doing, std::string message, std::string sqlstate) const {
  const char* password = PQpass(conn_.get());
  std::string text = "PostgreSQL " + target_ + ": " + std::string(doing) + ": " + std::move(message);
  return {Error::database(scrub(std::move(text), password == nullptr ? "" : password)), std::move(sqlstate)};
}

PgResult<Rows> Connection::take(pg_result* result, std::string_view doing) {
  Rows rows(result);
  const bool lost = PQstatus(conn_.get()) == CONNECTION_BAD;
  if (result != nullptr) {
    switch (PQresultStatus(result)) {
      case PGRES_COMMAND_OK:
      case PGRES_TUPLES_OK:
      case PGRES_EMPTY_QUERY: return rows;
      case PGRES_COPY_IN:
      case PGRES_COPY_OUT:
      case PGRES_COPY_BOTH:
        return std::unexpected(
            PgError(Error::invalid_argument("PostgreSQL " + target_ + ": " + std::string(doing) +
                                            ": COPY is not supported on this connection"),
                    ""));
      default: break;
    }
  }
  std::string sqlstate = result == nullptr ? "" : field(result, PG_DIAG_SQLSTATE);
  std::string message = result == nullptr ? "" : field(result, PG_DIAG_MESSAGE_PRIMARY);
  // Failures libpq detects itself (a closed socket) come without fields.
  if (message.empty()) message = one_line(PQerrorMessage(conn_.get()));
  if (message.empty()) message = "the statement failed without a message";
  if (sqlstate.empty() && lost) sqlstate = kSqlstateConnectionFailure;
  if (!sqlstate.empty()) message += " (SQLSTATE " + sqlstate + ")";
  if (result != nullptr) {
    if (const std::string detail = field(result, PG_DIAG_MESSAGE_DETAIL); !detail.empty()) {
      message += ". " + detail;
    }
    if (const std::string hint = field(result, PG_DIAG_MESSAGE_HINT); !hint.empty()) {
      message += " Hint: " + hint;
    }
  }
  if (lost) message += ". The connection to the server is lost; it must be reset or opened again";
  return std::unexpected(error_here(doing, std::move(message), std::move(sqlstate)));
}

PgResult<Rows> Connection::exec(const std::string& sql) {
  return take(PQexec(conn_.get(), sql.c_str()), shown_sql(sql));
}

PgResult<Rows> Connection::exec_params(const std::string& sql, const Params& params) {
  const std::vector<const char*> values = values_of(params);
  return take(PQexecParams(conn_.get(), sql.c_str(), static_cast<int>(values.size()), nullptr, values.data(),
                           nullptr, nullptr, 0),
              shown_sql(sql));
}

PgStatus Connection::prepare_in_session(const std::string& name, const Prepared& statement) {
  auto done = take(PQprepare(conn_.get(), name.c_str(), statement.sql.c_str(), statement.nparams, nullptr),
                   "preparing \"" + name + "\" as " + shown_sql(statement.sql));
  if (!done) return std::unexpected(std::move(done.error()));
  session_prepared_.insert(name);
  return {};
}

PgStatus Connection::prepare(const std::string& name, const std::string& sql, int nparams) {
  if (const auto it = prepared_.find(name); it != prepared_.end()) {
    if (it->second.sql != sql || it->second.nparams != nparams) {
      return std::unexpected(
          PgError(Error::invalid_argument("PostgreSQL " + target_ + ": statement \"" + name +
                                          "\" is already prepared with different SQL"),
                  ""));
    }
    if (session_prepared_.contains(name)) return {};
    return prepare_in_session(name, it->second);
  }
  Prepared statement{sql, nparams};
  if (auto done = prepare_in_session(name, statement); !done) return done;
  prepared_.emplace(name, std::move(statement));
  return {};
}

PgResult<Rows> Connection::exec_prepared(const std::string& name, const Params& params) {
  const auto it = prepared_.find(name);
  if (it == prepared_.end()) {
    return std::unexpected(PgError(
        Error::invalid_argument("PostgreSQL " + target_ + ": no statement \"" + name + "\" was prepared"),
        ""));
  }
  if (!session_prepared_.contains(name)) {
    if (auto done = prepare_in_session(name, it->second); !done)
      return std::unexpected(std::move(done.error()));
  }
  const std::vector<const char*> values = values_of(params);
  return take(PQexecPrepared(conn_.get(), name.c_str(), static_cast<int>(values.size()), values.data(),
                             nullptr, nullptr, 0),
              "prepared statement \"" + name + "\"");
}

bool Connection::is_broken() {
  pg_conn* c = conn_.get();
  if (PQstatus(c) == CONNECTION_BAD) return true;
  if (PQtransactionStatus(c) == PQTRANS_ACTIVE) return false;  // a result is on its way
  // A server that ends a session (shutdown, restart, idle timeout) sends a
  // last error and closes the socket; reading what arrived since the last
  // statement sees the close: one read takes the message, the next the end
  // of the stream. Neither blocks, and notifications read meanwhile stay
  // queued for PQnotifies.
  for (int i = 0; i < 2 && PQstatus(c) == CONNECTION_OK; ++i) {
    if (PQconsumeInput(c) == 0) break;
  }
  return PQstatus(c) == CONNECTION_BAD;
}

PgStatus Connection::reset() {
  PQreset(conn_.get());
  session_prepared_.clear();
  if (PQstatus(conn_.get()) != CONNECTION_OK)
    return std::unexpected(connect_error(conn_.get(), "reconnecting", explicit_password_));
  // A multi-host URL may have moved to another server.
  target_ = describe_target(conn_.get());
  return set_up_session();
}

bool Connection::idle_in_no_transaction() const noexcept {
  return PQtransactionStatus(conn_.get()) == PQTRANS_IDLE;
}

std::string Connection::quote_identifier(std::string_view name) const {
  std::unique_ptr<char, decltype(&PQfreemem)> quoted(
      PQescapeIdentifier(conn_.get(), name.data(), name.size()), &PQfreemem);
  if (quoted) return quoted.get();
  // Only on invalid encoding or out of memory; doubling quotes is the rule.
  std::string out = "\"";
  for (const char ch : name) out += ch == '"' ? std::string("\"\"") : std::string(1, ch);
  return out + "\"";
}

PgResult<Connection> connect(const ConnectOptions& options) {
  // libpq treats 0 as "wait forever" and rounds 1 up to 2 seconds.
  const std::chrono::seconds timeout_s{std::max<long long>(2, options.connect_timeout.count())};
  const std::string timeout = std::to_string(timeout_s.count());
  // Later keywords override the URL's settings, earlier ones are defaults
  // it may override (expand_dbname = 1 reads the URL at "dbname").
  std::vector<const char*> keys = {"application_name", "client_encoding", "dbname", "connect_timeout"};
  std::vector<const char*> values = {"ratchet", "UTF8", options.url.c_str(), timeout.c_str()};
  if (options.password) {
    keys.push_back("password");
    values.push_back(options.password->c_str());
  }
  keys.push_back(nullptr);
  values.push_back(nullptr);
  // libpq reads the time with time(), in whole seconds, so a timeout that
  // ran its course may end up to a second early; one that ended sooner
  // than that was cut short by the wall clock stepping forward.
  const auto cut_short_before = timeout_s - std::chrono::seconds(1);
  for (int attempt = 1;; ++attempt) {
    const auto began = std::chrono::steady_clock::now();
    std::unique_ptr<pg_conn, Connection::Finish> conn(PQconnectdbParams(keys.data(), values.data(), 1));
    if (!conn) {
      return std::unexpected(PgError(Error::database("cannot connect to PostgreSQL at " +
                                                     mask_url(options.url) + ": libpq is out of memory"),
                                     std::string(kSqlstateCannotConnect)));
    }
    if (PQstatus(conn.get()) == CONNECTION_OK) {
      Connection c(conn.release(), options.password.has_value(), options.lock_timeout);
      if (auto st = c.set_up_session(); !st) return std::unexpected(st.error());
      return c;
    }
    const bool timed_out =
        std::string_view(PQerrorMessage(conn.get())).find("timeout expired") != std::string_view::npos;
    if (!timed_out || attempt >= kConnectTries ||
        std::chrono::steady_clock::now() - began >= cut_short_before) {
      PgError e = connect_error(conn.get(), "connecting", options.password.has_value());
      // A URL libpq could not parse leaves it no password to hide.
      std::string message = scrub_url_password(e.error().message(), options.url);
      if (options.password) message = scrub(std::move(message), *options.password);
      return std::unexpected(PgError(Error::database(std::move(message)), e.sqlstate()));
    }
    spdlog::warn(
        "connecting to PostgreSQL at {}: libpq's connect timeout ended after {} ms, as the wall clock "
        "stepped forward; connecting again",
        describe_target(conn.get()),
        std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - began)
            .count());
  }
}

}  // namespace ratchet::store::pg

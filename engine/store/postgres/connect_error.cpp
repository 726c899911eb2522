#include "store/postgres/connect_error.hpp"

#include <libpq-fe.h>

#include "store/postgres/url.hpp"

namespace ratchet::store::pg {
namespace {

constexpr std::string_view kPasswordSources =
    "set PGPASSWORD, add a line host:port:database:user:password to the password file (PGPASSFILE, "
    "default ~/.pgpass, mode 0600), or put ${NAME} as the password in the database URL so ratchet "
    "takes it from the environment variable NAME";

std::string or_default(const char* value, std::string_view fallback) {
  return (value == nullptr || *value == '\0') ? std::string(fallback) : std::string(value);
}

bool contains(std::string_view text, std::string_view part) {
  return text.find(part) != std::string_view::npos;
}

}  // namespace

std::string describe_target(const pg_conn* conn) {
  return or_default(PQuser(conn), "?") + "@" + or_default(PQhost(conn), "localhost") + ":" +
         or_default(PQport(conn), "5432") + "/" + or_default(PQdb(conn), "?");
}

std::string one_line(std::string_view text) {
  std::string out;
  for (const char ch : text) {
    const bool space = ch == '\n' || ch == '\r' || ch == '\t' || ch == ' ';
    if (space && (out.empty() || out.back() == ' ')) continue;
    out += space ? ' ' : ch;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

PgError connect_error(const pg_conn* conn, std::string_view doing, bool explicit_password) {
  const std::string user = or_default(PQuser(conn), "?");
  const std::string server = or_default(PQhost(conn), "localhost") + ":" + or_default(PQport(conn), "5432");
  const std::string db = or_default(PQdb(conn), "?");
  const char* password = PQpass(conn);
  // PQerrorMessage may quote the connection string back (a malformed URL).
  const std::string said = scrub(one_line(PQerrorMessage(conn)), password == nullptr ? "" : password);
  const std::string where = "PostgreSQL at " + server + " (database \"" + db + "\", user \"" + user + "\")";
  const std::string prefix = std::string(doing) + " to " + where + " failed: ";

  auto fail_with = [&](std::string what, std::string_view sqlstate) {
    return PgError(Error::database(prefix + what + " [libpq: " + said + "]"), std::string(sqlstate));
  };

  if (PQconnectionNeedsPassword(conn)) {
    return fail_with("the server asks user \"" + user +
                         "\" for a password and none was found. To give one, " +
                         std::string(kPasswordSources),
                     "28000");
  }
  if (contains(said, "password authentication failed") ||
      (PQconnectionUsedPassword(conn) && contains(said, "authentication failed"))) {
    const std::string source =
        explicit_password ? "the password from ratchet's configuration" : "the password libpq found";
    return fail_with("the server refused " + source + " for user \"" + user +
                         "\". Check the user name and the " + "password: " + std::string(kPasswordSources),
                     "28P01");
  }
  if (contains(said, "database \"") && contains(said, "does not exist")) {
    return fail_with("there is no database \"" + db + "\" on that server. Create it (createdb -O " + user +
                         " " + db + ") or fix the database name in the URL",
                     "3D000");
  }
  if (contains(said, "role \"") && contains(said, "does not exist")) {
    return fail_with("the server has no role \"" + user + "\". Create it (CREATE ROLE " + user +
                         " LOGIN PASSWORD ...) or fix the user name in the URL",
                     "28000");
  }
  if (contains(said, "starting up") || contains(said, "shutting down") || contains(said, "recovery mode") ||
      contains(said, "not yet accepting connections")) {
    return fail_with("the server is starting up or shutting down; try again shortly", "57P03");
  }
  return fail_with(
      "the server cannot be reached or refused the connection. Check that PostgreSQL runs there "
      "and accepts TCP connections on that host and port (listen_addresses, port, pg_hba.conf, "
      "firewall), or fix the host and port in the database URL",
      kSqlstateCannotConnect);
}

}  // namespace ratchet::store::pg

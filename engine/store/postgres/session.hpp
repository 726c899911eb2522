// Statements of the PostgreSQL backend over one Connection, as the store
// interfaces want them: each statement prepared once per connection (named
// after its SQL), parameters always bound, and a failure thrown as
// PgFailure, which the Store or LimiterTables that opened the transaction
// turns back into an Error value (store/job_store.hpp: backend failures
// propagate out of JobStore methods).
//
// Thread-safety: one thread at a time, as its Connection.
#pragma once

#include <cstdint>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <unordered_map>

#include "store/postgres/connection.hpp"

namespace ratchet::store::pg {

// A failed statement, carried through the store's JobStore calls.
class PgFailure : public std::runtime_error {
 public:
  explicit PgFailure(PgError error) : std::runtime_error(error.error().message()), error_(std::move(error)) {}
  const PgError& error() const noexcept { return error_; }

 private:
  PgError error_;
};

inline Param p(std::int64_t v) { return std::to_string(v); }
inline Param p(std::string v) { return Param(std::move(v)); }
inline Param p(const char* v) { return Param(std::string(v)); }
inline Param p(std::optional<std::int64_t> v) { return v ? p(*v) : Param(); }
inline Param null() { return Param(); }

class Session {
 public:
  explicit Session(Connection& connection) : c_(connection) {}
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // Runs `sql` (a string literal or otherwise long-lived text: its address
  // names the prepared statement) with `params`; throws PgFailure.
  Rows run(const char* sql, const Params& params = {});
  // Runs statements without parameters (BEGIN, SAVEPOINT ...); throws PgFailure.
  Rows simple(const std::string& sql);

  Connection& connection() { return c_; }
  // Forget what was prepared (the connection was reset and prepares afresh).
  void forget_prepared() { names_.clear(); }

 private:
  Connection& c_;
  std::unordered_map<const char*, std::string> names_;
};

// Values of a row; each throws PgFailure for a value that is not what the schema holds.
std::int64_t i64(const Rows& rows, int row, int col);
std::optional<std::int64_t> opt_i64(const Rows& rows, int row, int col);
std::string text(const Rows& rows, int row, int col);  // "" for NULL

}  // namespace ratchet::store::pg

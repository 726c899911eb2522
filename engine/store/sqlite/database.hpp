// Opening ratchet's SQLite file: creation with mode 0600, pragmas (WAL,
// synchronous, busy timeout), schema migrations tracked by PRAGMA
// user_version, and the translation of SQLite failures into clear
// ratchet::Error values (kDatabase) that name the file and what to do.
//
// A database written by a newer ratchet, a file that is not a database, a
// read-only file or a locked file is refused before anything is written.
//
// Ownership: open_database returns a connection the caller owns. A
// connection is used by one thread at a time.
#pragma once

#include <chrono>
#include <exception>
#include <filesystem>
#include <memory>
#include <string_view>

#include <SQLiteCpp/Database.h>

#include "ratchet/clock.hpp"
#include "ratchet/status.hpp"

namespace ratchet::store {

// The newest schema this build knows.
int schema_version() noexcept;

struct DatabaseOptions {
  std::filesystem::path path;
  bool synchronous_full = false;
  std::chrono::milliseconds busy_timeout{5000};
  // Create the file and apply migrations (the writer connection does; read
  // connections only check the version).
  bool migrate = true;
  // The clock that lease deadlines of writes are read on (Store::write with
  // a lease); null: the system clock.
  std::shared_ptr<const Clock> clock;
};

[[nodiscard]] Result<std::unique_ptr<SQLite::Database>> open_database(const DatabaseOptions& options);

// A kDatabase Error for an exception thrown while `doing` something with the
// database at `path`: what went wrong and how to fix it.
Error database_error(const std::filesystem::path& path, std::string_view doing, const std::exception& e);

}  // namespace ratchet::store

// LimiterTables on an SQLite connection of its own: each transact() is one
// BEGIN IMMEDIATE transaction, so every process serialises its decisions on
// the database's write lock (waiting up to the busy timeout). Commits do not
// wait for fsync (synchronous=NORMAL, as the store's own connection), so
// that a call does not leave a disk flush later than it was counted.
#pragma once

#include <chrono>
#include <filesystem>

#include "store/limiter_tables.hpp"

namespace ratchet::store {

LimiterTablesFactory sqlite_limiter_tables(std::filesystem::path path,
                                           std::chrono::milliseconds busy_timeout);

}  // namespace ratchet::store

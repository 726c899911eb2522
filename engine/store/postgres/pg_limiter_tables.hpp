// LimiterTables on a PostgreSQL connection of its own. Each transact() is
// one READ COMMITTED transaction that first takes a transaction-scoped
// advisory lock on the key, so every decision on a key, from any process on
// any host, runs alone; each statement after the lock reads what the
// decisions before it committed. (Skip-locked claims would let two hosts
// spend one budget; the lock serialises it.) A lost connection is reset and
// the decision run again, with backoff, for up to `busy_timeout` (a server
// restarting refuses connections for a moment). The commit does not wait for the log's flush
// to disk (synchronous_commit off, for these transactions only).
#pragma once

#include <chrono>

#include "store/limiter_tables.hpp"
#include "store/postgres/connection.hpp"

namespace ratchet::store::pg {

LimiterTablesFactory pg_limiter_tables(ConnectOptions options, std::chrono::milliseconds busy_timeout);

}  // namespace ratchet::store::pg

// ratchet's tables in a PostgreSQL database, in the schema the connection's
// search_path names first (so one database may hold several ratchets, one
// schema each). Every table is named ratchet_*, beside the application's own.
//
// Migrations are ordered; ratchet_schema holds the version applied. Opening
// applies the missing ones in one transaction under an advisory lock, so
// processes starting together migrate once. Refused before anything is
// written: a database written by a newer ratchet, and one that has ratchet's
// job table without its version table (not made by ratchet). The role needs
// no superuser: CREATE on the schema (or owning it) is enough.
#pragma once

#include "store/postgres/session.hpp"

namespace ratchet::store::pg {

// The newest schema this build knows.
int pg_schema_version() noexcept;

// Brings the schema to pg_schema_version(); `migrate` false only checks it.
// Throws PgFailure for the server's errors; returns the Error for a schema
// it refuses.
[[nodiscard]] Status migrate_schema(Session& s, bool migrate);

}  // namespace ratchet::store::pg

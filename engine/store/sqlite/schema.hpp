// ratchet's database schema as an ordered list of migrations; the last
// one's version is the schema version this build writes.
#pragma once

#include <vector>

namespace ratchet::store {

struct Migration {
  int version;      // user_version after this migration
  const char* sql;  // statements run in one transaction
};

const std::vector<Migration>& migrations();

}  // namespace ratchet::store

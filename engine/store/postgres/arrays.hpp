// Array parameters for statements that take many rows at once: values
// written as PostgreSQL array literals, bound as one text parameter and cast
// in the statement ($1::bigint[], $2::text[]), so a batch of any size is one
// prepared statement.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ratchet::store::pg {

// {1,2,3}
std::string bigint_array(const std::vector<std::int64_t>& values);
// {"a","b \"quoted\""}: every element quoted, so no value is read as NULL
// or split at a comma, brace or space.
std::string text_array(const std::vector<std::string>& values);

}  // namespace ratchet::store::pg

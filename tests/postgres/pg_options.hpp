// ConnectOptions for a test in one expression (designated initializers
// that skip a member trip -Wmissing-field-initializers in GCC 12).
#pragma once

#include <chrono>
#include <optional>
#include <string>
#include <utility>

#include "store/postgres/connection.hpp"

namespace ratchet::testing {

inline store::pg::ConnectOptions pg_options(std::string url,
                                            std::optional<std::string> password = std::nullopt,
                                            std::chrono::seconds timeout = std::chrono::seconds(10)) {
  store::pg::ConnectOptions o;
  o.url = std::move(url);
  o.password = std::move(password);
  o.connect_timeout = timeout;
  return o;
}

}  // namespace ratchet::testing

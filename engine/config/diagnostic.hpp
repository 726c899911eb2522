// One problem found in a configuration file, with where it is.
//
// The loader collects every diagnostic of a file before it gives up, so a
// user fixes them all in one pass. Messages never hold a value that came
// from the environment (${NAME}); they name the variable instead.
//
// Plain value; safe to copy between threads.
#pragma once

#include <string>
#include <vector>

#include "config/spec.hpp"

namespace ratchet::config {

struct Diagnostic {
  SourceRef where;
  std::string message;

  // "oscar.toml:12:3: plugin.imdb.limit[0].rate: must be at least 1, got 0"
  std::string to_string() const;
};

// Every diagnostic, one per line, in file order.
std::string to_string(const std::vector<Diagnostic>& diagnostics);

}  // namespace ratchet::config

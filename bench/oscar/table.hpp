// The benchmark's output: the rows side by side as a text table (with the
// per-portal detail and the validation under it), or as one JSON document.
//
// Thread-safety: pure functions of their arguments.
#pragma once

#include <ostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "fixed.hpp"
#include "harness.hpp"
#include "setup.hpp"

namespace ratchet::bench {

// `v` with `decimals` digits after the point, for the tables.
void print_table(std::ostream& out, const BenchSetup& setup, const std::vector<Row>& rows);

nlohmann::json to_json(const BenchSetup& setup, const std::vector<Row>& rows);

}  // namespace ratchet::bench

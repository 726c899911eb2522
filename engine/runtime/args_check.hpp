// Checks a job's arguments against its type's declared arguments before
// anything is written: the arguments must be a JSON object, every required
// field present, every field of its declared type, and no undeclared field.
// An empty declaration accepts any object.
#pragma once

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/spec.hpp"
#include "ratchet/status.hpp"

namespace ratchet::runtime {

Status check_args(const std::string& job_type, const std::vector<config::ArgSpec>& declared,
                  const nlohmann::json& args);

}  // namespace ratchet::runtime

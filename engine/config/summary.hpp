// A short, human-readable account of what a configuration declares: what
// `ratchet config check FILE` prints when the file is valid, and what a
// reload compares to say what changed.
//
// Secrets (values from ${NAME}) are shown as ***. Pure functions; safe from
// any thread.
#pragma once

#include <string>

#include "config/spec.hpp"

namespace ratchet::config {

// The whole summary: a first line naming the file with its counts of
// plugins and job types, then the engine, each plugin, each job type.
std::string summarize(const Config& config);

// One section each, as it appears in summarize(): the engine line, one
// plugin (its policy and operations), one job type (its steps).
std::string summarize_engine(const Config& config);
// `env_keys` (Config::env_keys) lists the fields to show as ***.
std::string summarize_plugin(const PluginSpec& plugin, const std::set<std::string>& env_keys = {});
std::string summarize_job(const JobTypeSpec& job, const std::set<std::string>& env_keys = {});

// One policy on one line: limits, concurrency, retry, breaker, timeouts
// (no masking: for policies built in code).
std::string summarize_policy(const CallPolicy& policy);

// JSON with each listed pointer's value replaced by "***".
nlohmann::json mask(nlohmann::json value, const std::set<std::string>& secret_paths);

}  // namespace ratchet::config

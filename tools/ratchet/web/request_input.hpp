// What a request to the dashboard's API brings from outside, read and
// checked: the query of the jobs list, the JSON body of an action, a job id
// in the path. Every refusal is a 400 (or 404 for an id) whose text names
// the bad value and how to write it. Pure functions; safe from any thread.
#pragma once

#include <map>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "ratchet/job.hpp"

namespace ratchet::cli::web {

struct Reply {
  int status = 200;
  nlohmann::json body;
};

// {"error": message} with `status`.
Reply error_reply(int status, std::string message);

using Params = std::map<std::string, std::string>;

// The most jobs one page lists.
inline constexpr int kMaxPage = 500;
inline constexpr int kDefaultPage = 50;

// The query of a request target ("/api/v1/jobs?state=dead&q=x"), percent-
// decoded; a parameter given twice keeps its first value. nullopt when a
// parameter is not one of the list's (state, type, queue, id, q, before,
// limit), named in `bad`: a misspelt filter must not show every job.
std::optional<Params> parse_query(std::string_view target, std::string& bad);

// A JSON object whose values are strings, integers or null (left out), as
// parameters; nullopt for anything else. An empty body is no parameter.
std::optional<Params> parse_body(std::string_view body);

// The filter `params` give, or the 400 that names the bad one. The limit
// defaults to kDefaultPage.
std::optional<Reply> read_filter(const Params& params, JobFilter& filter);

// A job id as written in a path: a whole number from 1.
std::optional<JobId> parse_job_id(std::string_view text);

}  // namespace ratchet::cli::web

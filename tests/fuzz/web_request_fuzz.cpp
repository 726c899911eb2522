// Fuzz target: what a request to the dashboard brings from outside. The
// input is three parts split at the first two newlines: a query string, a
// JSON action body, and a Cookie header.
//
// Invariants, beyond "never crashes":
//   - a query is refused only for a parameter the jobs list does not take,
//     and one that is read has only parameters it takes;
//   - a filter read from it has a page size from 1 to 500 and no negative
//     id, or a 400 whose text names the parameter that is wrong;
//   - a body read as parameters came from a JSON object, and each value is
//     one of its strings or integers as written;
//   - a cookie's value never runs into the next cookie, and is found in the
//     header right after its name;
//   - a job id read from a path is a whole number from 1;
//   - the whole input, as the bytes a connection received, is a whole
//     request (connection_pool.hpp) no later than any of its prefixes, and
//     whole under a body limit whenever it is under a larger one: the pool
//     never waits for bytes a request does not need.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "connection_pool.hpp"
#include "fuzz_check.hpp"
#include "web/access.hpp"
#include "web/request_input.hpp"

namespace {

std::string_view next_part(std::string_view& rest) {
  const auto nl = rest.find('\n');
  const std::string_view part = rest.substr(0, nl);
  rest = nl == std::string_view::npos ? std::string_view{} : rest.substr(nl + 1);
  return part;
}

bool taken(const std::string& key) {
  return key == "state" || key == "type" || key == "queue" || key == "id" || key == "q" || key == "before" ||
         key == "limit";
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using namespace ratchet::cli::web;
  std::string_view rest(reinterpret_cast<const char*>(data), size);
  const std::string_view query = next_part(rest);
  const std::string_view body = next_part(rest);
  const std::string_view cookie = rest;

  std::string bad;
  auto params = parse_query("/api/v1/jobs?" + std::string(query), bad);
  if (!params) {
    FUZZ_CHECK(!taken(bad), "refused a parameter the list takes: \"" + bad + "\"");
  } else {
    for (const auto& [k, v] : *params) FUZZ_CHECK(taken(k), "read a parameter the list does not take: " + k);
    ratchet::JobFilter filter;
    if (auto refused = read_filter(*params, filter)) {
      FUZZ_CHECK(refused->status == 400, "a bad filter is not a 400: " + refused->body.dump());
      const std::string message = refused->body.value("error", "");
      FUZZ_CHECK(message.starts_with("state ") || message.starts_with("id ") ||
                     message.starts_with("before ") || message.starts_with("limit "),
                 "the refusal names no parameter: " + message);
    } else {
      FUZZ_CHECK(filter.limit >= 1 && filter.limit <= kMaxPage, "page size " + std::to_string(filter.limit));
      FUZZ_CHECK(filter.id >= 0 && filter.before_id >= 0, "a negative id was read");
    }
  }

  if (auto fields = parse_body(body)) {
    const auto j = nlohmann::json::parse(body, nullptr, false);
    FUZZ_CHECK(body.empty() || j.is_object(), "parameters from a body that is no JSON object");
    for (const auto& [k, v] : *fields) {
      FUZZ_CHECK(j.contains(k), "a parameter the body does not hold: " + k);
      const auto& value = j[k];
      const std::string as_written = value.is_string() ? value.get<std::string>() : value.dump();
      FUZZ_CHECK(v == as_written, k + " read as \"" + v + "\" from " + value.dump());
    }
  }

  const std::string session = ratchet::cli::web::cookie_value(cookie, "ratchet_session");
  FUZZ_CHECK(session.find(';') == std::string::npos, "a cookie ran into the next: " + session);
  if (!session.empty()) {
    FUZZ_CHECK(cookie.find("ratchet_session=" + session) != std::string_view::npos,
               "a cookie value not found after its name: " + session);
  }

  if (auto id = parse_job_id(query)) FUZZ_CHECK(*id >= 1, "job id " + std::to_string(*id));

  ratchet::cli::Unread whole;
  whole.bytes.assign(reinterpret_cast<const char*>(data), size);
  ratchet::cli::Unread half;
  half.bytes = whole.bytes.substr(0, size / 2);
  constexpr std::size_t kMaxBody = 64 * 1024;
  FUZZ_CHECK(!half.has_request(kMaxBody) || whole.has_request(kMaxBody),
             "a request whole in a prefix is not whole with the bytes after it");
  FUZZ_CHECK(!whole.has_request(kMaxBody) || whole.has_request(0),
             "a request whole under a body limit is not whole under a smaller one");
  return 0;
}

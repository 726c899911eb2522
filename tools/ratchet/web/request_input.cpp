#include "web/request_input.hpp"

#include <fmt/format.h>
#include <httplib.h>

#include <charconv>
#include <utility>

namespace ratchet::cli::web {

namespace {

std::string param(const Params& params, const std::string& name) {
  auto it = params.find(name);
  return it == params.end() ? std::string() : it->second;
}

std::optional<std::int64_t> to_int(std::string_view text) {
  std::int64_t v = 0;
  auto [p, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (ec != std::errc{} || p != text.data() + text.size()) return std::nullopt;
  return v;
}

bool known(const std::string& key) {
  return key == "state" || key == "type" || key == "queue" || key == "id" || key == "q" || key == "before" ||
         key == "limit";
}

}  // namespace

Reply error_reply(int status, std::string message) { return {status, {{"error", std::move(message)}}}; }

std::optional<Params> parse_query(std::string_view target, std::string& bad) {
  // Read here rather than by httplib, whose parse drops a parameter it
  // cannot split ("id=1 OR 1=1").
  Params out;
  const auto q = target.find('?');
  if (q == std::string_view::npos) return out;
  std::string_view query = target.substr(q + 1);
  while (!query.empty()) {
    const auto amp = query.find('&');
    const std::string_view part = query.substr(0, amp);
    query = amp == std::string_view::npos ? std::string_view{} : query.substr(amp + 1);
    if (part.empty()) continue;
    const auto eq = part.find('=');
    std::string key = httplib::detail::decode_url(std::string(part.substr(0, eq)), true);
    std::string value = eq == std::string_view::npos
                            ? std::string()
                            : httplib::detail::decode_url(std::string(part.substr(eq + 1)), true);
    if (!known(key)) {
      bad = std::move(key);
      return std::nullopt;
    }
    out.emplace(std::move(key), std::move(value));
  }
  return out;
}

std::optional<Params> parse_body(std::string_view body) {
  Params out;
  if (body.empty()) return out;
  auto j = nlohmann::json::parse(body, nullptr, false);
  if (j.is_discarded() || !j.is_object()) return std::nullopt;
  for (const auto& [k, v] : j.items()) {
    if (v.is_string()) {
      out[k] = v.get<std::string>();
    } else if (v.is_number_integer()) {
      out[k] = v.is_number_unsigned() ? std::to_string(v.get<std::uint64_t>())
                                      : std::to_string(v.get<std::int64_t>());
    } else if (!v.is_null()) {
      return std::nullopt;
    }
  }
  return out;
}

std::optional<Reply> read_filter(const Params& params, JobFilter& filter) {
  if (auto s = param(params, "state"); !s.empty()) {
    filter.state = parse_job_state(s);
    if (!filter.state) {
      return error_reply(400, fmt::format("state \"{}\" is not one of scheduled, available, running, "
                                          "retryable, completed, dead, cancelled",
                                          s));
    }
  }
  filter.type = param(params, "type");
  filter.queue = param(params, "queue");
  filter.text = param(params, "q");
  for (auto [name, field] : {std::pair{"id", &filter.id}, std::pair{"before", &filter.before_id}}) {
    if (auto s = param(params, name); !s.empty()) {
      auto v = to_int(s);
      if (!v || *v < 1)
        return error_reply(400, fmt::format("{} \"{}\" is not a job id (a whole number from 1)", name, s));
      *field = *v;
    }
  }
  if (auto s = param(params, "limit"); !s.empty()) {
    auto v = to_int(s);
    if (!v || *v < 1 || *v > kMaxPage) {
      return error_reply(400, fmt::format("limit \"{}\" is not a whole number from 1 to {}", s, kMaxPage));
    }
    filter.limit = static_cast<int>(*v);
  } else {
    filter.limit = kDefaultPage;
  }
  return std::nullopt;
}

std::optional<JobId> parse_job_id(std::string_view text) {
  auto v = to_int(text);
  if (!v || *v < 1) return std::nullopt;
  return *v;
}

}  // namespace ratchet::cli::web

#include "declared_limits.hpp"

#include <toml++/toml.h>

namespace ratchet::demo {

std::map<std::string, AllowedPerSecond> allowed_per_second(std::string_view toml) {
  std::map<std::string, AllowedPerSecond> out;
  toml::table doc;
  try {
    doc = toml::parse(toml);
  } catch (const toml::parse_error&) {
    return out;  // the engine reports a bad config itself
  }
  const toml::table* plugins = doc["plugin"].as_table();
  if (plugins == nullptr) return out;
  for (const auto& [name, node] : *plugins) {
    const toml::array* limits = node.as_table() ? (*node.as_table())["limit"].as_array() : nullptr;
    if (limits == nullptr || limits->empty() || !limits->front().is_table()) continue;
    const toml::table& limit = *limits->front().as_table();
    const auto rate = limit["rate"].value<std::int64_t>();
    if (!rate || limit["per"].value<std::string>().value_or("") != "1s") continue;
    AllowedPerSecond a;
    const auto burst = limit["burst"].value<std::int64_t>();
    const std::string algorithm = limit["algorithm"].value<std::string>().value_or("");
    if (algorithm == "fixed_window") {
      a = {*rate, true, "fixed window"};
    } else if (burst) {
      // A full bucket at the start of a second, then rate - 1 refills that
      // land strictly inside it.
      a = {*burst + *rate - 1, false, "token bucket, burst " + std::to_string(*burst)};
    } else {
      a = {*rate, false, "sliding window"};
    }
    a.shape = std::to_string(*rate) + "/1s " + a.shape;
    out.emplace(std::string(name.str()), std::move(a));
  }
  return out;
}

}  // namespace ratchet::demo

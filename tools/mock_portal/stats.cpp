#include "mock_portal/stats.hpp"

namespace ratchet::mock_portal {
namespace {

std::int64_t micros(std::chrono::system_clock::time_point t) {
  return std::chrono::duration_cast<std::chrono::microseconds>(t.time_since_epoch()).count();
}

std::chrono::system_clock::time_point from_micros(std::int64_t us) {
  return std::chrono::system_clock::time_point(
      std::chrono::duration_cast<std::chrono::system_clock::duration>(std::chrono::microseconds(us)));
}

}  // namespace

nlohmann::json to_json(const Stats& stats) {
  nlohmann::json portals = nlohmann::json::object();
  for (const auto& [name, p] : stats.portals) {
    portals[name] = {{"requests", p.requests},
                     {"ok", p.ok},
                     {"throttled", p.throttled},
                     {"errors", p.errors},
                     {"max_in_window", p.max_in_window},
                     {"max_in_aligned_window", p.max_in_aligned_window},
                     {"window_ms", p.window.count()},
                     {"movies", p.movies},
                     {"units", p.units},
                     {"first_arrival_us", micros(p.first_arrival)},
                     {"last_arrival_us", micros(p.last_arrival)}};
  }
  return {{"portals", portals}, {"connections", stats.connections}};
}

Result<Stats> stats_from_json(const nlohmann::json& doc) {
  try {
    Stats s;
    s.connections = doc.at("connections").get<std::int64_t>();
    for (const auto& [name, p] : doc.at("portals").items()) {
      PortalStats ps;
      ps.requests = p.at("requests").get<std::int64_t>();
      ps.ok = p.at("ok").get<std::int64_t>();
      ps.throttled = p.at("throttled").get<std::int64_t>();
      ps.errors = p.at("errors").get<std::int64_t>();
      ps.max_in_window = p.at("max_in_window").get<std::int64_t>();
      ps.max_in_aligned_window = p.at("max_in_aligned_window").get<std::int64_t>();
      ps.window = std::chrono::milliseconds(p.at("window_ms").get<std::int64_t>());
      ps.movies = p.at("movies").get<std::map<std::string, std::int64_t>>();
      ps.units = p.value("units", ps.requests);
      ps.first_arrival = from_micros(p.value("first_arrival_us", std::int64_t{0}));
      ps.last_arrival = from_micros(p.value("last_arrival_us", std::int64_t{0}));
      s.portals.emplace(name, std::move(ps));
    }
    return s;
  } catch (const nlohmann::json::exception& e) {
    return fail(Error::invalid_argument(std::string("mock portal stats: unexpected JSON: ") + e.what()));
  }
}

}  // namespace ratchet::mock_portal

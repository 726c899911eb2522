#include "setup.hpp"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <sstream>

namespace ratchet::bench {
namespace {

using mock_portal::Dialect;

std::int64_t scaled(std::int64_t base, double scale) {
  return std::max<std::int64_t>(1, std::llround(static_cast<double>(base) * scale));
}

// A TOML basic string: quotes and backslashes escaped (paths may hold them).
std::string quoted(const std::string& text) {
  std::string out = "\"";
  for (char c : text) {
    if (c == '"' || c == '\\') out += '\\';
    out += c;
  }
  return out + "\"";
}

std::string millis(std::chrono::milliseconds d) { return quoted(std::to_string(d.count()) + "ms"); }

PortalSetup portal(std::string name, std::string dialect, Dialect d, std::int64_t limit, double scale) {
  PortalSetup p;
  p.name = std::move(name);
  p.dialect = std::move(dialect);
  p.options.dialect = d;
  p.options.limit = scaled(limit, scale);
  p.options.window = std::chrono::milliseconds(1000);
  // Token-bucket APIs commonly allow a short burst rather than a whole
  // window's worth: a sixth of the rate here (--burst changes it).
  if (d == Dialect::kTokenBucket) p.options.burst = std::max<std::int64_t>(1, p.options.limit / 6);
  return p;
}

}  // namespace

double PortalSetup::rate() const {
  return static_cast<double>(options.limit) * 1000.0 / static_cast<double>(options.window.count());
}

std::int64_t PortalSetup::allowed_in_window() const {
  if (options.dialect != Dialect::kTokenBucket) return options.limit;
  // A full bucket at the start of the window, then limit - 1 refills that
  // land strictly inside the half-open window.
  return options.burst.value_or(options.limit) + options.limit - 1;
}

std::array<PortalSetup, kPortals> default_portals(double scale) {
  auto imdb =
      portal("imdb", "fixed window, X-RateLimit-* (Reset: Unix time)", Dialect::kFixedWindow, 80, scale);
  imdb.options.reset_style = mock_portal::ResetStyle::kUnixTime;
  auto rt = portal("rotten_tomatoes", "token bucket, Retry-After: seconds", Dialect::kTokenBucket, 60, scale);
  rt.options.retry_after_style = mock_portal::RetryAfterStyle::kSeconds;
  auto sify = portal("sify", "fixed window, IETF RateLimit + RateLimit-Policy", Dialect::kIetf, 40, scale);
  auto netflix = portal("netflix", "fixed window, bare 429", Dialect::kBare429, 50, scale);
  auto amazon =
      portal("amazon_prime", "token bucket, Retry-After: HTTP-date", Dialect::kTokenBucket, 70, scale);
  amazon.options.retry_after_style = mock_portal::RetryAfterStyle::kHttpDate;
  return {std::move(imdb), std::move(rt), std::move(sify), std::move(netflix), std::move(amazon)};
}

std::vector<std::string> movie_names(int jobs) {
  std::vector<std::string> names;
  names.reserve(static_cast<std::size_t>(std::max(0, jobs)));
  for (int i = 0; i < jobs; ++i) {
    char buf[32];
    std::snprintf(buf, sizeof buf, "movie-%04d", i);
    names.emplace_back(buf);
  }
  return names;
}

double BenchSetup::bound_seconds() const {
  double slowest = portals[0].rate();
  for (const auto& p : portals) slowest = std::min(slowest, p.rate());
  return static_cast<double>(jobs) / slowest;
}

std::string BenchSetup::engine_toml(const std::filesystem::path& database) const {
  std::ostringstream out;
  const bool declared = engine_limits == EngineLimits::kDeclared;
  out << "# Written by ratchet-bench-oscar: the five mock portals, limits "
      << (declared ? "declared as the server enforces them" : "not declared (learned from the servers)")
      << ".\n\n"
      << "[engine]\n"
      << "database = " << quoted(database.string()) << "\n"
      << "plugins  = " << quoted(plugin_dir.string()) << "\n"
      << "workers  = " << workers << "\n"
      << "park_threshold = \"20ms\"\n"
      << "poll_interval  = \"20ms\"\n";
  for (const auto& p : portals) {
    out << "\n[plugin." << p.name << "]\n"
        << "base_url = " << quoted(p.url) << "\n"
        << "timeout  = \"10s\"\n";
    if (declared) {
      out << "\n[[plugin." << p.name << ".limit]]\n"
          << "rate = " << p.options.limit << "\n"
          << "per  = " << millis(p.options.window) << "\n";
      if (p.options.dialect == Dialect::kTokenBucket) {
        out << "algorithm = \"token_bucket\"\n"
            << "burst     = " << p.options.burst.value_or(p.options.limit) << "\n";
      } else {
        // The server counts windows by when requests arrive. A sliding window
        // would let the whole quota go at once, and the network spreads such
        // a burst into the next window; paced starts (a bucket of one) keep
        // every window, aligned or not, within the limit at the same rate.
        out << "algorithm = \"token_bucket\"\n"
            << "burst     = 1\n";
      }
    }
    out << "\n[plugin." << p.name << ".retry]\n"
        << "attempts = 10\n"
        << "backoff  = \"exponential\"\n"
        << "initial  = \"100ms\"\n"
        << "max      = \"5s\"\n"
        << "jitter   = \"full\"\n"
        << "on       = [\"throttled\", \"5xx\", \"timeout\", \"connect\"]\n";
  }
  out << "\n[job.rate_movie]\n"
      << "attempts = 10\n"
      << "steps = [\n";
  for (const auto& p : portals) {
    out << "  { name = " << quoted(p.name) << ", call = " << quoted(p.name + ".get_rating")
        << ", args = { name = \"{{args.name}}\" } },\n";
  }
  out << "]\n";
  return out.str();
}

Status BenchSetup::write_engine_toml(const std::filesystem::path& file,
                                     const std::filesystem::path& database) const {
  std::ofstream out(file, std::ios::trunc);
  out << engine_toml(database);
  out.close();
  if (!out) {
    return fail(Error::io("cannot write the engine configuration to '" + file.string() +
                          "'; check that its folder exists and is writable"));
  }
  return {};
}

}  // namespace ratchet::bench

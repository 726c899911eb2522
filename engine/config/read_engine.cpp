#include <array>

#include "common/database_url.hpp"
#include "config/bounds.hpp"
#include "config/sections.hpp"

namespace ratchet::config::detail {
namespace {

// "synchronous" is listed so that a file written before it moved to
// [engine.sqlite] gets an error saying where it went, not "unknown key".
constexpr std::array<std::string_view, 14> kEngineKeys = {
    "database",      "plugins",        "workers",       "busy_timeout",   "lease",
    "heartbeat",     "park_threshold", "poll_interval", "shutdown_grace", "max_lease_expiries",
    "plugin_rescan", "sqlite",         "postgres",      "synchronous"};
constexpr std::array<std::string_view, 1> kSqliteKeys = {"synchronous"};
constexpr std::array<std::string_view, 1> kPostgresKeys = {"connect_timeout"};

void read_sqlite(Reader& r, const toml::node& node, EngineSpec& e) {
  const toml::table* t = r.table(node, "engine.sqlite");
  if (t == nullptr) return;
  r.check_keys(*t, "engine.sqlite", kSqliteKeys, "[engine.sqlite]");
  if (const toml::node* v = t->get("synchronous")) {
    if (auto full = r.choice<bool>(*v, "engine.sqlite.synchronous", {{"normal", false}, {"full", true}}))
      e.sqlite_synchronous_full = *full;
  }
}

void read_postgres(Reader& r, const toml::node& node, EngineSpec& e) {
  const toml::table* t = r.table(node, "engine.postgres");
  if (t == nullptr) return;
  r.check_keys(*t, "engine.postgres", kPostgresKeys, "[engine.postgres]");
  if (const toml::node* v = t->get("connect_timeout")) {
    if (auto d = r.duration(*v, "engine.postgres.connect_timeout", Bound::kPositive))
      e.postgres_connect_timeout = *d;
  }
}

}  // namespace

EngineSpec read_engine(Reader& r, const toml::table& t, const std::filesystem::path& base) {
  const std::string path = "engine";
  EngineSpec e;
  r.check_keys(t, path, kEngineKeys, "[engine]");
  // A server URL is kept as written; a relative path resolves against the file.
  auto resolve = [&](const std::filesystem::path& p) {
    if (common::is_server_url(p.native())) return p;
    return p.is_absolute() ? p : (base / p).lexically_normal();
  };
  e.database = resolve(e.database);
  e.plugins = resolve(e.plugins);
  for (auto&& [key, node] : t) {
    const std::string k(key.str());
    const std::string at = child_path(path, k);
    if (k == "database" || k == "plugins") {
      if (auto v = r.string(node, at)) {
        if (v->value.empty()) {
          r.error(node, at, "must not be empty");
        } else {
          (k == "database" ? e.database : e.plugins) = resolve(v->value);
        }
      }
    } else if (k == "workers") {
      if (auto v = r.integer(node, at, 1, kMaxWorkers)) e.workers = static_cast<int>(*v);
    } else if (k == "synchronous") {
      r.error(node, at,
              "a setting of the SQLite backend, read from its own table: write it as [engine.sqlite] "
              "synchronous = \"normal\" or \"full\"");
    } else if (k == "sqlite") {
      read_sqlite(r, node, e);
    } else if (k == "postgres") {
      read_postgres(r, node, e);
    } else if (k == "busy_timeout") {
      if (auto v = r.duration(node, at, Bound::kNonNegative)) e.busy_timeout = *v;
    } else if (k == "lease") {
      if (auto v = r.duration(node, at, Bound::kPositive)) e.lease = *v;
    } else if (k == "heartbeat") {
      if (auto v = r.duration(node, at, Bound::kPositive)) e.heartbeat = *v;
    } else if (k == "park_threshold") {
      if (auto v = r.duration(node, at, Bound::kNonNegative)) e.park_threshold = *v;
    } else if (k == "poll_interval") {
      if (auto v = r.duration(node, at, Bound::kPositive)) e.poll_interval = *v;
    } else if (k == "shutdown_grace") {
      if (auto v = r.duration(node, at, Bound::kNonNegative)) e.shutdown_grace = *v;
    } else if (k == "plugin_rescan") {
      if (auto v = r.duration(node, at, Bound::kNonNegative)) e.plugin_rescan = *v;
    } else if (k == "max_lease_expiries") {
      if (auto v = r.integer(node, at, 1, 1000)) e.max_lease_expiries = static_cast<int>(*v);
    }
  }
  // A lease renewed no more often than it lasts expires under a live worker.
  if (e.heartbeat >= e.lease) {
    const toml::node* heartbeat = t.get("heartbeat");
    const toml::node* n = heartbeat != nullptr ? heartbeat : t.get("lease");
    r.error(n != nullptr ? n->source() : t.source(),
            heartbeat != nullptr ? "engine.heartbeat" : "engine.lease",
            "heartbeat must be shorter than lease (a lease renewed less often than it lasts expires under a "
            "live worker)");
  }
  return e;
}

}  // namespace ratchet::config::detail

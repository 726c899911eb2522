// The throw-away cluster the PostgreSQL tests run against, as written by
// tools/pg_cluster.sh to DIR/env. CTest's `postgres` fixture starts it and
// passes the file as RATCHET_TEST_PG_ENV; run by hand, a test falls back to
// the build tree's pg-cluster/env (tools/pg_cluster.sh start build/default/pg-cluster).
//
// A missing or incomplete cluster fails the test: a skipped PostgreSQL
// suite would look green while testing nothing.
#pragma once

#include <stdlib.h>

#include <filesystem>
#include <fstream>
#include <map>
#include <optional>
#include <string>

#include <gtest/gtest.h>

#include "ratchet_test_paths.hpp"

namespace ratchet::testing {

struct PgTestEnv {
  std::string url;       // postgresql://ratchet@127.0.0.1:PORT/ratchet (no password)
  std::string passfile;  // DIR/pgpass
  std::string port;
  std::string dir;    // the cluster's DIR, for tools/pg_cluster.sh restart
  std::string admin;  // a superuser URL over the unix socket

  // The `ratchet` role's password, read from the pgpass file.
  std::string password() const {
    std::ifstream in(passfile);
    std::string line;
    while (std::getline(in, line)) {
      const std::size_t colon = line.rfind(':');
      if (colon != std::string::npos) return line.substr(colon + 1);
    }
    return {};
  }
  // A URL for `database` as `ratchet`, e.g. not_ratchet or a missing one.
  std::string url_for(const std::string& database) const {
    return "postgresql://ratchet@127.0.0.1:" + port + "/" + database;
  }
  std::string cluster_script() const { return std::string(RATCHET_SOURCE_DIR) + "/tools/pg_cluster.sh"; }
};

// KEY='value' lines; the values pg_cluster.sh writes have no quotes inside.
inline std::map<std::string, std::string> read_env_file(const std::filesystem::path& path) {
  std::map<std::string, std::string> out;
  std::ifstream in(path);
  std::string line;
  while (std::getline(in, line)) {
    const std::size_t eq = line.find('=');
    if (eq == std::string::npos || line.starts_with('#')) continue;
    std::string value = line.substr(eq + 1);
    if (value.size() >= 2 && value.front() == '\'' && value.back() == '\'')
      value = value.substr(1, value.size() - 2);
    out[line.substr(0, eq)] = value;
  }
  return out;
}

inline std::optional<PgTestEnv> load_pg_test_env(std::string& why) {
  const char* from_ctest = ::getenv("RATCHET_TEST_PG_ENV");
  const std::filesystem::path path =
      from_ctest != nullptr ? from_ctest : std::filesystem::path(RATCHET_BINARY_DIR) / "pg-cluster" / "env";
  if (!std::filesystem::exists(path)) {
    why = "no PostgreSQL test cluster: " + path.string() +
          " is missing. Run the tests through ctest (its postgres fixture starts one) or start one with "
          "tools/pg_cluster.sh start " +
          path.parent_path().string();
    return std::nullopt;
  }
  auto vars = read_env_file(path);
  PgTestEnv env{vars["RATCHET_TEST_PG_URL"], vars["PGPASSFILE"], vars["RATCHET_TEST_PG_PORT"],
                vars["RATCHET_TEST_PG_DIR"], vars["RATCHET_TEST_PG_ADMIN"]};
  if (env.url.empty() || env.passfile.empty() || env.port.empty() || env.dir.empty() || env.admin.empty()) {
    why = path.string() + " lacks one of RATCHET_TEST_PG_URL, PGPASSFILE, RATCHET_TEST_PG_PORT, " +
          "RATCHET_TEST_PG_DIR, RATCHET_TEST_PG_ADMIN";
    return std::nullopt;
  }
  return env;
}

// Base fixture: loads the cluster's settings and points libpq at its
// password file, as a deployment's PGPASSFILE would.
class PgTest : public ::testing::Test {
 protected:
  void SetUp() override {
    std::string why;
    auto loaded = load_pg_test_env(why);
    ASSERT_TRUE(loaded.has_value()) << why;
    env_ = *loaded;
    ::setenv("PGPASSFILE", env_.passfile.c_str(), 1);
    ::unsetenv("PGPASSWORD");
  }

  PgTestEnv env_;
};

}  // namespace ratchet::testing

// A fresh, empty schema on the test cluster for one test, named first in the
// search_path of the URL returned (as a deployment sharing one database
// would), so tests never see each other's tables. Points libpq at the
// cluster's password file (PGPASSFILE), which child processes inherit.
// Throws when the cluster is missing: a test must fail, not skip.
#pragma once

#include <stdlib.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <random>
#include <stdexcept>
#include <string>

#include "pg_test_env.hpp"
#include "store/postgres/connection.hpp"

namespace ratchet::testing {

inline std::string fresh_postgres_schema() {
  std::string why;
  auto env = load_pg_test_env(why);
  if (!env) throw std::runtime_error(why);
  ::setenv("PGPASSFILE", env->passfile.c_str(), 1);
  ::unsetenv("PGPASSWORD");
  // Engines on the cluster keep their crash records (PgStore::crash_record)
  // in its folder, which goes with it, not under the home directory.
  ::setenv("XDG_STATE_HOME", (env->dir + "/state").c_str(), 1);
  // Named apart from every schema an earlier test process left on the
  // cluster: a pid alone repeats, as pids wrap (at 32,768 by default) in a
  // run that starts thousands of processes.
  static int counter = 0;
  static const std::string run = [] {
    std::random_device random;
    char hex[17];
    std::snprintf(hex, sizeof hex, "%08x%08x", random(), random());
    return std::string(hex);
  }();
  const std::string schema = "t" + std::to_string(::getpid()) + "_" + run + "_" + std::to_string(++counter);
  auto c = store::pg::connect({env->url, std::nullopt, std::chrono::seconds(10)});
  if (!c) throw std::runtime_error(c.error().to_string());
  if (auto made = c->exec("CREATE SCHEMA " + schema); !made)
    throw std::runtime_error(made.error().to_string());
  return env->url + "?options=-csearch_path%3D" + schema;
}

}  // namespace ratchet::testing

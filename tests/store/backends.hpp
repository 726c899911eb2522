// The store conformance suite's backends. Every case written as
// TEST_P(<suite>, ...) over StoreBackendTest runs once against each backend
// listed here, through the same open_store() the engine uses, so a backend
// passes the suite or is not one. A new backend adds one entry.
#pragma once

#include <gtest/gtest.h>

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <vector>

#include "fresh_schema.hpp"
#include "store/open_store.hpp"
#include "temp_dir.hpp"

namespace ratchet::store::testing {

struct Backend {
  std::string name;
  // The database setting of a fresh, empty database for one test.
  std::function<std::string(const ratchet::testing::TempDir&)> fresh_database;
};

inline std::vector<Backend> backends() {
  return {
      {"sqlite", [](const ratchet::testing::TempDir& dir) { return dir.file("jobs.db").string(); }},
      {"postgres",
       [](const ratchet::testing::TempDir&) { return ratchet::testing::fresh_postgres_schema(); }},
  };
}

inline void PrintTo(const Backend& b, std::ostream* os) { *os << b.name; }

inline std::string backend_name(const ::testing::TestParamInfo<Backend>& info) { return info.param.name; }

// A test with a fresh database of its backend, open as `store_`.
class StoreBackendTest : public ::testing::TestWithParam<Backend> {
 protected:
  void SetUp() override {
    database_ = GetParam().fresh_database(dir_);
    StoreOptions o;
    o.database = database_;
    auto s = open_store(o);
    ASSERT_TRUE(s) << s.error().to_string();
    store_ = std::move(*s);
  }

  ratchet::testing::TempDir dir_;
  std::string database_;
  std::unique_ptr<Store> store_;
};

}  // namespace ratchet::store::testing

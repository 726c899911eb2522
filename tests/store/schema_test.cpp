// Opening a database, on every backend (backends.hpp): a fresh one gets the
// current schema, opening it again changes nothing, and a database written
// by a newer ratchet or that is not ratchet's at all is refused, with what
// to do, before anything in it is written.
#include <gtest/gtest.h>

#include <string>

#include "backends.hpp"
#include "store/open_store.hpp"

namespace ratchet::store {
namespace {

constexpr Micros kT0 = 1'700'000'000'000'000;

bool contains(const std::string& text, const std::string& part) {
  return text.find(part) != std::string::npos;
}

class SchemaTest : public testing::StoreBackendTest {
 protected:
  Result<std::unique_ptr<Store>> open(const std::string& database) {
    StoreOptions o;
    o.database = database;
    return open_store(o);
  }
};

TEST_P(SchemaTest, AFreshDatabase_GetsTheCurrentSchemaVersion) {
  EXPECT_GT(backend().current_version, 0);
  EXPECT_EQ(backend().stored_version(database_), backend().current_version);
}

TEST_P(SchemaTest, OpenedAgain_ChangesNothingAndKeepsTheJobs) {
  auto id = store_->write([](JobStore& s) {
    return s.insert({"t", "default", "{}", 0, kT0, 3, ""}, kT0).id;
  });
  ASSERT_TRUE(id) << id.error().to_string();
  {
    auto beside = open(database_);  // another process, while this one runs
    ASSERT_TRUE(beside) << beside.error().to_string();
  }
  store_.reset();
  for (int i = 0; i < 2; ++i) {
    auto again = open(database_);
    ASSERT_TRUE(again) << again.error().to_string();
    auto job = (*again)->read([&](JobStore& s) { return s.get(*id); });
    ASSERT_TRUE(job && job->has_value()) << "the job survives a reopen";
    EXPECT_EQ((**job).type, "t");
  }
  EXPECT_EQ(backend().stored_version(database_), backend().current_version);
}

TEST_P(SchemaTest, WrittenByANewerRatchet_IsRefusedNamingTheVersionAndLeftUntouched) {
  store_.reset();
  const int newer = backend().current_version + 7;
  backend().set_version(database_, newer);
  const std::string before = backend().snapshot(database_);
  auto s = open(database_);
  ASSERT_FALSE(s) << "a newer schema was opened";
  EXPECT_EQ(s.error().code(), ErrorCode::kDatabase);
  const std::string m = s.error().message();
  EXPECT_TRUE(contains(m, "newer ratchet")) << m;
  EXPECT_TRUE(contains(m, std::to_string(newer))) << "names the version: " << m;
  EXPECT_TRUE(contains(m, std::to_string(backend().current_version))) << "and the one it knows: " << m;
  EXPECT_TRUE(contains(m, "upgrade ratchet")) << "says what to do: " << m;
  EXPECT_EQ(backend().snapshot(database_), before) << "nothing was written";
  EXPECT_EQ(backend().stored_version(database_), newer);
}

TEST_P(SchemaTest, ADatabaseThatIsNotRatchets_IsRefusedClearlyAndLeftUntouched) {
  for (const testing::Foreign& f : backend().foreign_databases(dir_)) {
    SCOPED_TRACE(f.what);
    const std::string before = backend().snapshot(f.database);
    for (int attempt = 0; attempt < 2; ++attempt) {
      auto s = open(f.database);
      ASSERT_FALSE(s) << f.what << " was opened as a ratchet database";
      EXPECT_EQ(s.error().code(), ErrorCode::kDatabase);
      const std::string m = s.error().message();
      EXPECT_TRUE(contains(m, "not a ratchet database") || contains(m, "did not create")) << m;
      EXPECT_TRUE(contains(m, "point ")) << "says what to do: " << m;
      EXPECT_EQ(backend().snapshot(f.database), before) << "nothing was written";
    }
  }
}

TEST_P(SchemaTest, ADatabaseThatCannotBeReached_IsADatabaseError) {
  auto s = open(backend().unreachable);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code(), ErrorCode::kDatabase);
}

INSTANTIATE_TEST_SUITE_P(Backends, SchemaTest, ::testing::ValuesIn(testing::backends()),
                         testing::backend_name);

}  // namespace
}  // namespace ratchet::store

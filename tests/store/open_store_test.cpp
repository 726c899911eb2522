// The database setting chooses the backend: a path is an SQLite file, a URL
// names a server; anything else is refused with what to write instead.
#include "store/open_store.hpp"

#include <gtest/gtest.h>

#include <filesystem>

#include "temp_dir.hpp"

namespace ratchet::store {
namespace {

TEST(OpenStore, IsServerUrl_OnlyForASchemeAndSlashes) {
  EXPECT_TRUE(is_server_url("postgresql://ratchet@db.internal/jobs"));
  EXPECT_TRUE(is_server_url("postgres://db/jobs"));
  EXPECT_FALSE(is_server_url("ratchet.db"));
  EXPECT_FALSE(is_server_url("/var/lib/ratchet/jobs.db"));
  EXPECT_FALSE(is_server_url("./data://odd name.db")) << "a path that merely contains :// is a file";
  EXPECT_FALSE(is_server_url("://nothing"));
}

TEST(OpenStore, APath_OpensAnSqliteFileThere) {
  testing::TempDir dir;
  StoreOptions o;
  o.database = dir.file("jobs.db").string();
  auto s = open_store(o);
  ASSERT_TRUE(s) << s.error().to_string();
  EXPECT_EQ((*s)->location(), o.database);
  EXPECT_TRUE(std::filesystem::exists(dir.file("jobs.db")));
}

TEST(OpenStore, AnUnknownScheme_IsRefusedSayingWhatToUse) {
  StoreOptions o;
  o.database = "mysql://root:hunter2@db/jobs";
  auto s = open_store(o);
  ASSERT_FALSE(s);
  EXPECT_EQ(s.error().code(), ErrorCode::kDatabase);
  EXPECT_NE(s.error().message().find("postgresql://"), std::string::npos) << s.error().message();
  EXPECT_EQ(s.error().message().find("hunter2"), std::string::npos) << "no password in an error";
}

}  // namespace
}  // namespace ratchet::store

// The database setting chooses the backend: a path is an SQLite file, a URL
// names a server; anything else is refused with what to write instead.
#include "store/open_store.hpp"

#include <gtest/gtest.h>

#include <filesystem>

#include "store/job_store.hpp"
#include "store/sqlite/sqlite_limiter_tables.hpp"
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

// A backup restored by moving it into place under a running process: the
// process wrote on into the old file, which nothing else reads, and every
// write said it succeeded. Now each write and read fails, naming the file.
TEST(OpenStore, AFileReplacedWhileOpen_WritesAndReadsFailNamingIt) {
  testing::TempDir dir;
  StoreOptions o;
  o.database = dir.file("jobs.db").string();
  auto s = open_store(o);
  ASSERT_TRUE(s) << s.error().to_string();
  auto insert = [&] {
    return (*s)->write([](JobStore& js) { return js.insert({"t", "default", "{}", 0, 1, 3, ""}, 1).id; });
  };
  ASSERT_TRUE(insert());
  std::filesystem::copy_file(dir.file("jobs.db"), dir.file("backup.db"));
  std::filesystem::rename(dir.file("backup.db"), dir.file("jobs.db"));
  auto written = insert();
  ASSERT_FALSE(written) << "a write into the file no longer at the path";
  EXPECT_NE(written.error().message().find("was removed or replaced"), std::string::npos)
      << written.error().message();
  EXPECT_NE(written.error().message().find(o.database), std::string::npos) << written.error().message();
  auto read = (*s)->read([](JobStore& js) { return js.counts(); });
  EXPECT_FALSE(read) << "a read of the file no longer at the path";
  std::filesystem::remove(dir.file("jobs.db"));
  EXPECT_FALSE(insert()) << "a write into a file removed";
}

// The limits' own connection to the same file: the history of their calls
// kept in a replaced file would be lost to the next process, which would
// exceed them.
TEST(OpenStore, AFileReplacedWhileOpen_TheLimitsConnectionFailsItsWritesToo) {
  testing::TempDir dir;
  StoreOptions o;
  o.database = dir.file("jobs.db").string();
  ASSERT_TRUE(open_store(o));
  auto tables = sqlite_limiter_tables(dir.file("jobs.db"), std::chrono::seconds(5))();
  ASSERT_TRUE(tables) << tables.error().to_string();
  auto write = [&](const std::string& key) {
    return (*tables)->transact(key, "record a start", [&] { (*tables)->create_state(key, 1); });
  };
  ASSERT_TRUE(write("a"));
  std::filesystem::copy_file(dir.file("jobs.db"), dir.file("backup.db"));
  std::filesystem::rename(dir.file("backup.db"), dir.file("jobs.db"));
  auto written = write("b");
  ASSERT_FALSE(written) << "a write into the file no longer at the path";
  EXPECT_NE(written.error().message().find("was removed or replaced"), std::string::npos)
      << written.error().message();
  EXPECT_NE(written.error().message().find("record a start"), std::string::npos) << written.error().message();
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

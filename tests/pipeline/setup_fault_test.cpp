// A step whose call the engine cannot set up, for a fault of its own and
// not of the step (the limits' database cannot be opened: too many open
// files, a disk gone), sends nothing; it must not be charged an attempt of
// its job, or every job dies of a fault that passes. It parks, waits
// longer while the fault lasts, and runs once it is gone.
#include <fcntl.h>
#include <gtest/gtest.h>
#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <filesystem>
#include <memory>
#include <stop_token>
#include <vector>

#include "config/load.hpp"
#include "mock_portal/server.hpp"
#include "no_descriptors.hpp"
#include "pipeline/plugin_step_caller.hpp"
#include "plugin_host/plugin_host.hpp"
#include "ratchet_test_paths.hpp"
#include "store/sqlite/database.hpp"
#include "store/sqlite/sqlite_limiter_tables.hpp"
#include "temp_dir.hpp"

namespace ratchet::pipeline {
namespace {

using namespace std::chrono_literals;

class SetupFaultTest : public ::testing::Test {
 protected:
  void SetUp() override {
    auto server = mock_portal::MockPortalServer::start({});
    ASSERT_TRUE(server.has_value()) << server.error().to_string();
    server_ = std::move(*server);
    store::DatabaseOptions o;
    o.path = dir_.path() / "jobs.db";
    ASSERT_TRUE(store::open_database(o).has_value());
    plugin_host::PluginHostOptions h;
    h.folder = RATCHET_PLUGIN_DIR;
    auto host = plugin_host::PluginHost::open(h);
    ASSERT_TRUE(host.has_value()) << host.error().to_string();
    host_ = std::move(*host);
  }

  std::unique_ptr<PluginStepCaller> caller() {
    // A declared limit keeps the history of its calls in the database: its
    // gate opens a connection to it.
    auto config = config::load_string("[plugin.imdb]\nbase_url = \"" + server_->portal_url("imdb") +
                                          "\"\n[[plugin.imdb.limit]]\nrate = 100\nper = \"1s\"\n",
                                      "test.toml");
    EXPECT_TRUE(config.has_value());
    auto real = store::sqlite_limiter_tables(dir_.path() / "jobs.db", 5s);
    limit::ConnectionFactory connect = [this, real]() -> Result<std::unique_ptr<store::LimiterTables>> {
      if (broken_)
        return fail(Error::database("cannot open the limiter database: unable to open database file"));
      return real();
    };
    return std::make_unique<PluginStepCaller>(host_, *config, connect, clock_, 1);
  }

  static runtime::StepCall step() {
    runtime::StepCall c;
    c.plugin = "imdb";
    c.operation = "get_rating";
    c.args = {{"name", "Heat"}};
    c.job_id = 7;
    c.step = "imdb";
    c.idempotency_key = "7:imdb";
    c.attempt = 1;
    return c;
  }

  ratchet::testing::TempDir dir_;
  std::unique_ptr<mock_portal::MockPortalServer> server_;
  std::shared_ptr<plugin_host::PluginHost> host_;
  std::shared_ptr<FakeClock> clock_ = std::make_shared<FakeClock>();
  std::atomic<bool> broken_{true};
};

TEST_F(SetupFaultTest, LimitsDatabaseThatCannotBeOpened_TheStepParksLongerEachTimeAndRunsOnceItOpens) {
  auto c = caller();
  std::stop_source stop;
  Duration wait_before{};
  for (Duration expected : {1s, 2s, 4s}) {
    const TimePoint now = clock_->now();
    const runtime::CallOutcome out = c->call(step(), stop.get_token());
    ASSERT_EQ(out.kind(), runtime::CallOutcome::Kind::kPark)
        << (out.kind() == runtime::CallOutcome::Kind::kFailed ? out.error().to_string() : "");
    EXPECT_EQ(out.until() - now, expected);
    EXPECT_NE(out.reason().find("could not be set up"), std::string::npos) << out.reason();
    EXPECT_NE(out.reason().find("cannot open the limiter database"), std::string::npos) << out.reason();
    EXPECT_GT(out.until() - now, wait_before);
    wait_before = out.until() - now;
    clock_->advance(expected);
  }
  // The fault is gone: the step runs, and nothing was lost of it.
  broken_ = false;
  const runtime::CallOutcome out = c->call(step(), stop.get_token());
  ASSERT_EQ(out.kind(), runtime::CallOutcome::Kind::kOk)
      << (out.kind() == runtime::CallOutcome::Kind::kFailed ? out.error().to_string() : out.reason());
  EXPECT_TRUE(out.output().contains("rating")) << out.output().dump();
}

TEST_F(SetupFaultTest, AStepsOwnErrorStillFailsIt) {
  broken_ = false;
  auto c = caller();
  std::stop_source stop;
  runtime::StepCall call = step();
  call.operation = "no_such_operation";
  const runtime::CallOutcome out = c->call(call, stop.get_token());
  EXPECT_EQ(out.kind(), runtime::CallOutcome::Kind::kFailed);
}

// SQLite says "unable to open database file" for any cause; the hint must
// not send a user out of descriptors to check the path and permissions.
TEST(LimiterDatabaseOpen, OutOfFileDescriptors_TheErrorSaysSoNotToCheckThePath) {
  ratchet::testing::TempDir dir;
  store::DatabaseOptions o;
  o.path = dir.path() / "jobs.db";
  ASSERT_TRUE(store::open_database(o).has_value());
  const auto connect = store::sqlite_limiter_tables(o.path, 5s);

  auto opened = ratchet::testing::without_descriptors(connect);

  ASSERT_FALSE(opened.has_value());
  const std::string message = opened.error().message();
  EXPECT_NE(message.find("too many open files"), std::string::npos) << message;
  EXPECT_EQ(message.find("permissions"), std::string::npos) << message;
  // And once descriptors are free again, it opens.
  EXPECT_TRUE(connect().has_value());
}

}  // namespace
}  // namespace ratchet::pipeline

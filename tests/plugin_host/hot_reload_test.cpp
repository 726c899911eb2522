// Hot drop: files added, replaced (overwritten in place, as `cp` does) and
// removed while the host runs, with calls in flight.
#include <chrono>
#include <future>
#include <latch>
#include <memory>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fake_host_services.hpp"
#include "plugin_host/library.hpp"
#include "plugin_host/plugin_host.hpp"
#include "ratchet/clock.hpp"
#include "test_folder.hpp"

namespace ratchet::plugin_host {
namespace {

using ratchet::testing::FakeHostServices;
using ratchet::testing::TestFolder;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

std::unique_ptr<PluginHost> open_host(const TestFolder& folder, PluginHostOptions options = {}) {
  options.folder = folder.path();
  auto host = PluginHost::open(std::move(options));
  EXPECT_TRUE(host.has_value());
  return host ? std::move(*host) : nullptr;
}

std::string version_of(const Result<CallReply>& r) {
  if (!r) return "error: " + r.error().to_string();
  return r->output.value("version", "(none)");
}

TEST(HotDrop, NewFileAfterStart_CallableAfterRescanWithoutRestart) {
  TestFolder folder;
  folder.add("other");
  auto host = open_host(folder);
  FakeHostServices services;
  EXPECT_FALSE(host->call("versioned", "whoami", {}, {}, services, {}).has_value());

  folder.add("versioned_v1", "versioned.so");
  auto report = host->rescan();
  ASSERT_EQ(report.loaded.size(), 1u);
  EXPECT_EQ(report.loaded[0].version, "1.0.0");
  EXPECT_EQ(version_of(host->call("versioned", "whoami", {}, {}, services, {})), "1.0.0");
  EXPECT_EQ(version_of(host->call("other", "whoami", {}, {}, services, {})), "1.0.0");
}

TEST(HotDrop, UnchangedFolder_RescanLoadsNothing) {
  TestFolder folder;
  folder.add("versioned_v1", "versioned.so");
  folder.write("text.so", "not a library");
  auto host = open_host(folder);
  auto report = host->rescan();
  EXPECT_TRUE(report.loaded.empty());
  EXPECT_TRUE(report.failed.empty());  // a refused file is not retried until it changes
  EXPECT_EQ(host->failures().size(), 1u);
}

TEST(HotDrop, PollerWithInterval_PicksUpNewFileWhenClockAdvances) {
  TestFolder folder;
  auto clock = std::make_shared<FakeClock>();
  PluginHostOptions options;
  options.rescan_interval = 5s;
  options.clock = clock;
  auto host = open_host(folder, options);
  folder.add("versioned_v1", "versioned.so");
  for (int i = 0; i < 5000 && !host->find("versioned"); ++i) {
    clock->advance(5s);
    std::this_thread::sleep_for(1ms);  // lets the poller thread run its scan
  }
  ASSERT_TRUE(host->find("versioned").has_value());
  EXPECT_EQ(host->find("versioned")->version, "1.0.0");
}

TEST(HotDrop, FileReplacedWhileCallInFlight_OldCallFinishesOnOldVersionNewCallsUseNew) {
  TestFolder folder;
  auto file = folder.add("versioned_v1", "versioned.so");
  auto host = open_host(folder);
  const auto loaded_before = live_library_count();

  // The in-flight call blocks inside the host's HTTP service until released.
  std::latch entered(1);
  std::promise<void> release;
  std::shared_future<void> released = release.get_future().share();
  FakeHostServices blocking;
  blocking.set_handler([&](const HttpRequest&) {
    entered.count_down();
    released.wait();
    HttpResult r;
    r.status = 200;
    return r;
  });
  auto in_flight =
      std::async(std::launch::async, [&] { return host->call("versioned", "wait", {}, {}, blocking, {}); });
  entered.wait();

  folder.add("versioned_v2", "versioned.so");  // cp over the file in place
  EXPECT_EQ(std::filesystem::canonical(file), std::filesystem::canonical(folder.path() / "versioned.so"));
  auto report = host->rescan();
  ASSERT_EQ(report.loaded.size(), 1u);
  EXPECT_EQ(report.loaded[0].version, "2.0.0-b");
  EXPECT_EQ(live_library_count(), loaded_before + 1);  // both versions mapped

  FakeHostServices services;
  EXPECT_EQ(version_of(host->call("versioned", "whoami", {}, {}, services, {})), "2.0.0-b");

  release.set_value();
  auto old = in_flight.get();
  ASSERT_TRUE(old.has_value()) << old.error().to_string();
  EXPECT_EQ(old->output["version"], "1.0.0");
  EXPECT_EQ(old->plugin_version, "1.0.0");
  EXPECT_EQ(old->output["status"], 200);

  EXPECT_EQ(live_library_count(), loaded_before);  // the old version is unloaded
  EXPECT_EQ(version_of(host->call("versioned", "whoami", {}, {}, services, {})), "2.0.0-b");
}

TEST(HotDrop, ReplacedByHalfWrittenFile_PreviousVersionKeepsServing) {
  TestFolder folder;
  folder.add("versioned_v1", "versioned.so");
  auto host = open_host(folder);
  folder.add_truncated("versioned_v2", "versioned.so", 4096);
  auto report = host->rescan();
  ASSERT_EQ(report.failed.size(), 1u);
  EXPECT_THAT(report.failed[0].reason, HasSubstr("incomplete"));
  FakeHostServices services;
  EXPECT_EQ(version_of(host->call("versioned", "whoami", {}, {}, services, {})), "1.0.0");

  folder.add("versioned_v2", "versioned.so");
  host->rescan();
  EXPECT_EQ(version_of(host->call("versioned", "whoami", {}, {}, services, {})), "2.0.0-b");
  EXPECT_TRUE(host->failures().empty());
}

TEST(HotDrop, FileRemoved_PluginUnregisteredAndUnloaded) {
  TestFolder folder;
  auto file = folder.add("versioned_v1", "versioned.so");
  auto host = open_host(folder);
  const auto loaded = live_library_count();
  std::filesystem::remove(file);
  auto report = host->rescan();
  EXPECT_THAT(report.removed, ::testing::ElementsAre("versioned"));
  EXPECT_FALSE(host->find("versioned").has_value());
  EXPECT_EQ(live_library_count() + 1, loaded);
}

TEST(HotDrop, DuplicateNameFreedByRemoval_OtherFileLoadsOnRescan) {
  TestFolder folder;
  auto first = folder.add("versioned_v1", "a.so");
  folder.add("versioned_v2", "b.so");
  auto host = open_host(folder);
  EXPECT_EQ(host->find("versioned")->version, "1.0.0");
  ASSERT_EQ(host->failures().size(), 1u);

  std::filesystem::remove(first);
  host->rescan();
  ASSERT_TRUE(host->find("versioned").has_value());
  EXPECT_EQ(host->find("versioned")->version, "2.0.0-b");
  EXPECT_TRUE(host->failures().empty());
}

TEST(HotDrop, HostDestroyed_EveryLibraryUnloaded) {
  const auto before = live_library_count();
  {
    TestFolder folder;
    folder.add("versioned_v1", "versioned.so");
    folder.add("other");
    auto host = open_host(folder);
    EXPECT_EQ(live_library_count(), before + 2);
  }
  EXPECT_EQ(live_library_count(), before);
}

}  // namespace
}  // namespace ratchet::plugin_host

// Calls into plugins that misbehave: garbage replies, escaped exceptions and
// hangs give clear errors, and the host keeps serving the other plugins.
#include <chrono>
#include <future>
#include <memory>
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fake_host_services.hpp"
#include "plugin_host/call.hpp"
#include "plugin_host/plugin_host.hpp"
#include "ratchet/clock.hpp"
#include "test_folder.hpp"

namespace ratchet::plugin_host {
namespace {

using ratchet::testing::FakeHostServices;
using ratchet::testing::TestFolder;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

class MisbehavingPluginTest : public ::testing::Test {
 protected:
  void SetUp() override {
    folder_.add("misbehaving");
    folder_.add("throws_in_operation");
    folder_.add("versioned_v1", "versioned.so");
    PluginHostOptions options;
    options.folder = folder_.path();
    options.clock = clock_;
    auto host = PluginHost::open(options);
    ASSERT_TRUE(host.has_value());
    host_ = std::move(*host);
    ASSERT_EQ(host_->list().size(), 3u)
        << (host_->failures().empty() ? "" : host_->failures()[0].to_string());
  }

  Result<CallReply> call(const std::string& plugin, const std::string& op) {
    return host_->call(plugin, op, {}, {}, services_, {}, 10s);
  }

  // The host still answers a well-behaved plugin.
  void expect_host_still_works() {
    auto r = call("versioned", "whoami");
    ASSERT_TRUE(r.has_value()) << r.error().to_string();
    EXPECT_EQ(r->output["version"], "1.0.0");
  }

  TestFolder folder_;
  std::shared_ptr<FakeClock> clock_ = std::make_shared<FakeClock>();
  FakeHostServices services_;
  std::unique_ptr<PluginHost> host_;
};

TEST_F(MisbehavingPluginTest, UnknownStatus_PluginErrorNamesStatus) {
  auto r = call("misbehaving", "bad_status");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), ErrorCode::kPlugin);
  EXPECT_THAT(r.error().message(), HasSubstr("plugin 'misbehaving' 0.1 operation 'bad_status'"));
  EXPECT_THAT(r.error().message(), HasSubstr("unknown status 42"));
  expect_host_still_works();
}

TEST_F(MisbehavingPluginTest, NullOutputWithSize_PluginError) {
  auto r = call("misbehaving", "null_output");
  ASSERT_FALSE(r.has_value());
  EXPECT_THAT(r.error().message(), HasSubstr("NULL output buffer of 12 bytes"));
  expect_host_still_works();
}

TEST_F(MisbehavingPluginTest, BufferNotFromHostAlloc_PluginError) {
  auto r = call("misbehaving", "foreign_output");
  ASSERT_FALSE(r.has_value());
  EXPECT_THAT(r.error().message(), HasSubstr("host->alloc did not allocate"));
}

TEST_F(MisbehavingPluginTest, OkWithNonJsonOutput_PluginErrorQuotesPrintably) {
  auto r = call("misbehaving", "not_json");
  ASSERT_FALSE(r.has_value());
  EXPECT_THAT(r.error().message(), HasSubstr("not JSON: \"rating: high?\""));
}

// Masked, stored and shown, a value recurses once per level: 30,000
// nested arrays from a server crashed the process. Refused before parsing.
TEST_F(MisbehavingPluginTest, OkWithOutputNestedThousandsDeep_PluginErrorNamingTheDepth) {
  auto r = call("misbehaving", "deep_json");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), ErrorCode::kPlugin);
  EXPECT_THAT(r.error().message(), HasSubstr("output nested 30000 levels deep, past the 256 ratchet takes"));
  expect_host_still_works();
}

TEST_F(MisbehavingPluginTest, FatalWithoutMessage_FatalStatusWithPlaceholderMessage) {
  auto r = call("misbehaving", "fatal_no_message");
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, CallStatus::kFatal);
  EXPECT_EQ(r->message, "(the plugin gave no message)");
}

TEST_F(MisbehavingPluginTest, RawOperationThrows_PluginErrorAndHostKeepsWorking) {
  auto r = call("thrower", "boom");
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), ErrorCode::kPlugin);
  EXPECT_THAT(r.error().message(), HasSubstr("let a C++ exception escape through the C ABI"));
  expect_host_still_works();
  auto again = call("thrower", "boom");  // the library is still usable
  EXPECT_FALSE(again.has_value());
}

TEST_F(MisbehavingPluginTest, PluginWithOlderSmallerResponseStruct_HostWritesOnlyFieldsThatFit) {
  HttpResult answer;
  answer.status = 200;
  answer.message = "not for old plugins";
  answer.retry_after = 5s;
  services_.respond("http://old/", answer);
  auto r = call("misbehaving", "old_http");
  ASSERT_TRUE(r.has_value()) << r.error().to_string();
  EXPECT_EQ(r->output, (nlohmann::json{{"status", 200}, {"untouched", 1}}));
}

// Waits for plugin code that the host gave up on to return: the test must not
// end while a thread is still inside a plugin.
void wait_for_abandoned_calls() {
  for (int i = 0; i < 5000 && call_threads_running() > 0; ++i) std::this_thread::sleep_for(1ms);
  ASSERT_EQ(call_threads_running(), 0u);
  ASSERT_EQ(abandoned_calls_running(), 0u);
}

TEST_F(MisbehavingPluginTest, HangsPastTimeout_TimeoutErrorAndHostKeepsWorking) {
  auto pending = std::async(std::launch::async, [&] { return call("misbehaving", "hang"); });
  // The call's deadline is on the fake clock: push it past 10s until the
  // caller notices (it may not have read the clock yet on the first push).
  while (pending.wait_for(1ms) != std::future_status::ready) clock_->advance(11s);
  auto r = pending.get();
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), ErrorCode::kTimeout);
  EXPECT_THAT(r.error().message(),
              HasSubstr("plugin 'misbehaving' 0.1 operation 'hang' did not return within 10000ms"));
  expect_host_still_works();
  wait_for_abandoned_calls();
}

TEST_F(MisbehavingPluginTest, HostDestroyedWhileCallHangs_LibraryStaysLoadedUntilCallReturns) {
  const auto before = live_library_count();
  auto pending = std::async(std::launch::async, [&] { return call("misbehaving", "hang"); });
  while (pending.wait_for(1ms) != std::future_status::ready) clock_->advance(11s);
  EXPECT_FALSE(pending.get().has_value());
  host_.reset();
  // Read the count first: an abandoned call stops counting before it lets go
  // of its library, so a call still counted means the library was loaded.
  const auto live = live_library_count();
  if (abandoned_calls_running() > 0) {
    EXPECT_EQ(live + 2, before);  // misbehaving.so stays while its code runs
  } else {
    ADD_FAILURE() << "the hung call returned before the host was destroyed; the test proved nothing";
  }
  wait_for_abandoned_calls();
  EXPECT_EQ(live_library_count() + 3, before);  // everything unloaded now
}

}  // namespace
}  // namespace ratchet::plugin_host

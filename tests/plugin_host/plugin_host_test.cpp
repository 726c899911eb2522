// Loading a plugin folder: what loads, what is refused and why, and that one
// bad file never stops the others.
#include "plugin_host/plugin_host.hpp"

#include <unistd.h>

#include <filesystem>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "fake_host_services.hpp"
#include "no_descriptors.hpp"
#include "test_folder.hpp"

namespace ratchet::plugin_host {
namespace {

using ratchet::testing::FakeHostServices;
using ratchet::testing::TestFolder;
using ::testing::HasSubstr;

std::unique_ptr<PluginHost> open_host(const TestFolder& folder) {
  PluginHostOptions options;
  options.folder = folder.path();
  auto host = PluginHost::open(options);
  EXPECT_TRUE(host.has_value()) << (host ? "" : host.error().to_string());
  return host ? std::move(*host) : nullptr;
}

std::string failure_for(const PluginHost& host, const std::string& file) {
  for (const auto& f : host.failures())
    if (f.file.filename() == file) return f.reason;
  return "(no failure recorded for " + file + ")";
}

TEST(PluginHostOpen, MissingFolder_ConfigErrorNamesFolder) {
  PluginHostOptions options;
  options.folder = "/nonexistent/ratchet/plugins";
  auto host = PluginHost::open(options);
  ASSERT_FALSE(host.has_value());
  EXPECT_EQ(host.error().code(), ErrorCode::kConfig);
  EXPECT_THAT(host.error().message(), HasSubstr("/nonexistent/ratchet/plugins"));
}

TEST(PluginHostOpen, GoodPlugin_ListedWithNameVersionFileAndOperations) {
  TestFolder folder;
  auto file = folder.add("versioned_v1", "versioned.so");
  auto host = open_host(folder);
  auto list = host->list();
  ASSERT_EQ(list.size(), 1u);
  EXPECT_EQ(list[0].name, "versioned");
  EXPECT_EQ(list[0].version, "1.0.0");
  EXPECT_EQ(list[0].file, file);
  EXPECT_THAT(list[0].operations, ::testing::ElementsAre("whoami", "wait", "echo"));
  EXPECT_TRUE(host->failures().empty());
}

TEST(PluginHostOpen, FolderOfBrokenFiles_EachNamedWithReasonAndGoodOnesStillLoad) {
  TestFolder folder;
  folder.add("versioned_v1", "a_good.so");
  folder.add("other", "b_other.so");
  folder.add("other", "c_duplicate.so");
  folder.write("text.so", "this is a text file, not a library\n");
  folder.write("empty.so", "");
  folder.add("no_entry");
  folder.add("wrong_abi");
  folder.add("newer_abi");
  folder.add("throws_in_entry");
  folder.write("notes.txt", "ignored: not a .so");

  auto host = open_host(folder);
  ASSERT_TRUE(host);
  auto list = host->list();
  ASSERT_EQ(list.size(), 2u);
  EXPECT_EQ(list[0].name, "other");
  EXPECT_EQ(list[1].name, "versioned");

  EXPECT_THAT(failure_for(*host, "c_duplicate.so"), HasSubstr("declares plugin name 'other'"));
  EXPECT_THAT(failure_for(*host, "c_duplicate.so"), HasSubstr("b_other.so already provides"));
  EXPECT_THAT(failure_for(*host, "text.so"), HasSubstr("not a shared library"));
  EXPECT_THAT(failure_for(*host, "empty.so"), HasSubstr("not a shared library"));
  EXPECT_THAT(failure_for(*host, "no_entry.so"), HasSubstr("no entry point ratchet_plugin_entry_v1"));
  EXPECT_THAT(failure_for(*host, "wrong_abi.so"), HasSubstr("built for plugin ABI version 99"));
  EXPECT_THAT(failure_for(*host, "newer_abi.so"), HasSubstr("exports ratchet_plugin_entry_v2"));
  EXPECT_THAT(failure_for(*host, "throws_in_entry.so"), HasSubstr("entry point threw"));
  EXPECT_EQ(host->failures().size(), 7u);

  FakeHostServices services;
  auto reply = host->call("versioned", "whoami", {}, {}, services, {});
  ASSERT_TRUE(reply.has_value()) << reply.error().to_string();
  EXPECT_EQ(reply->output["version"], "1.0.0");
}

TEST(PluginHostOpen, PluginFromNewerHeaderWithGrownStructs_LoadsAndRuns) {
  TestFolder folder;
  folder.add("grown");
  auto host = open_host(folder);
  ASSERT_TRUE(host->find("grown").has_value()) << failure_for(*host, "grown.so");
  EXPECT_THAT(host->find("grown")->operations, ::testing::ElementsAre("noop", "noop2"));
  FakeHostServices services;
  auto reply = host->call("grown", "noop2", {}, {}, services, {});
  ASSERT_TRUE(reply.has_value()) << reply.error().to_string();
  EXPECT_EQ(reply->output, nlohmann::json::object());
}

// A plugin built before operations could estimate their cost keeps loading
// and running; its calls are admitted at their declared cost.
TEST(PluginHostOpen, PluginFromTheHeaderBeforeEstimates_LoadsRunsAndEstimatesNothing) {
  TestFolder folder;
  folder.add("old_operations");
  auto host = open_host(folder);
  ASSERT_TRUE(host->find("old").has_value()) << failure_for(*host, "old_operations.so");
  EXPECT_THAT(host->find("old")->operations, ::testing::ElementsAre("noop", "noop2"));
  FakeHostServices services;
  auto reply = host->call("old", "noop2", {}, {}, services, {});
  ASSERT_TRUE(reply.has_value()) << reply.error().to_string();
  EXPECT_EQ(host->estimate("old", "noop2", {{"points", 5}}, {}), 0);
}

// An estimate function that throws (a raw C++ plugin without the SDK) is
// no estimate; the engine goes on.
TEST(PluginHostCall, EstimateThatThrows_IsNoEstimate) {
  TestFolder folder;
  folder.add("throws_in_operation");
  auto host = open_host(folder);
  ASSERT_TRUE(host->find("thrower").has_value());
  EXPECT_EQ(host->estimate("thrower", "boom", {}, {}), 0);
}

TEST(PluginHostCall, ReadmeExamplePlugin_RatesMovie) {
  TestFolder folder;
  folder.add("readme_example");
  auto host = open_host(folder);
  FakeHostServices services;
  services.respond_json("http://portal/movies/Up", R"({"rating": 8.3})");
  auto reply =
      host->call("example", "get_rating", {{"name", "Up"}}, {{"base_url", "http://portal"}}, services, {});
  ASSERT_TRUE(reply.has_value()) << reply.error().to_string();
  EXPECT_EQ(reply->output, (nlohmann::json{{"rating", 8.3}}));
  services.respond_json("http://portal/movies/Up", R"({"rating": "high"})");
  reply =
      host->call("example", "get_rating", {{"name", "Up"}}, {{"base_url", "http://portal"}}, services, {});
  ASSERT_TRUE(reply.has_value());
  EXPECT_EQ(reply->status, CallStatus::kFatal);
  EXPECT_THAT(reply->message, HasSubstr(R"(no rating in {"rating": "high"})"));
}

TEST(PluginHostOpen, HalfWrittenFile_RefusedAsIncompleteThenLoadedWhenComplete) {
  TestFolder folder;
  auto full_size = std::filesystem::file_size(TestFolder::fixture("versioned_v1"));
  folder.add_truncated("versioned_v1", "versioned.so", full_size / 2);
  auto host = open_host(folder);
  EXPECT_TRUE(host->list().empty());
  EXPECT_THAT(failure_for(*host, "versioned.so"), HasSubstr("incomplete"));

  folder.add("versioned_v1", "versioned.so");  // the copy finishes
  auto report = host->rescan();
  ASSERT_EQ(report.loaded.size(), 1u);
  EXPECT_EQ(report.loaded[0].name, "versioned");
  EXPECT_TRUE(host->failures().empty());
}

// With no descriptor left (ulimit -n), the folder cannot be listed: every
// plugin was unloaded as "removed", and each call then failed its job's
// attempt. A listing cut short keeps what is loaded.
TEST(PluginHostOpen, FolderThatCannotBeListed_KeepsEveryPluginLoaded) {
  TestFolder folder;
  folder.add("versioned_v1", "versioned.so");
  auto host = open_host(folder);
  ASSERT_EQ(host->list().size(), 1u);

  const ScanReport report = ratchet::testing::without_descriptors([&] { return host->rescan(); });

  EXPECT_TRUE(report.removed.empty());
  ASSERT_EQ(host->list().size(), 1u);
  EXPECT_EQ(host->list()[0].name, "versioned");
  EXPECT_TRUE(host->rescan().removed.empty());
  EXPECT_EQ(host->list().size(), 1u);
}

TEST(PluginHostOpen, HeaderOnlyFile_RefusedAsIncomplete) {
  TestFolder folder;
  folder.add_truncated("versioned_v1", "versioned.so", 100);
  auto host = open_host(folder);
  EXPECT_THAT(failure_for(*host, "versioned.so"), HasSubstr("incomplete"));
}

TEST(PluginHostCheckConfigured, PluginWithoutFile_ConfigErrorNamesPluginAndFolder) {
  TestFolder folder;
  folder.add("versioned_v1", "versioned.so");
  folder.add("wrong_abi");
  auto host = open_host(folder);
  EXPECT_TRUE(host->check_configured({"versioned"}).has_value());
  auto s = host->check_configured({"versioned", "imdb"});
  ASSERT_FALSE(s.has_value());
  EXPECT_EQ(s.error().code(), ErrorCode::kConfig);
  EXPECT_THAT(s.error().message(), HasSubstr("plugin 'imdb' is configured"));
  EXPECT_THAT(s.error().message(), HasSubstr(folder.path().string()));
  EXPECT_THAT(s.error().message(), HasSubstr("wrong_abi.so"));  // a refused file might be why
}

TEST(PluginHostCall, UnconfiguredPlugin_CalledWithEmptyConfig) {
  TestFolder folder;
  folder.add("versioned_v1", "versioned.so");
  auto host = open_host(folder);
  FakeHostServices services;
  auto reply = host->call("versioned", "echo", {{"x", 1}}, nullptr, services,
                          {.idempotency_key = "job-7/imdb", .job_id = "job-7", .step_name = "imdb"});
  ASSERT_TRUE(reply.has_value()) << reply.error().to_string();
  EXPECT_EQ(reply->status, CallStatus::kOk);
  EXPECT_EQ(reply->output["config"], nlohmann::json::object());
  EXPECT_EQ(reply->output["args"]["x"], 1);
  EXPECT_EQ(reply->output["idempotency_key"], "job-7/imdb");
  EXPECT_EQ(reply->output["job_id"], "job-7");
  EXPECT_EQ(reply->output["step"], "imdb");
  EXPECT_EQ(reply->plugin_version, "1.0.0");
  EXPECT_THAT(services.logs(), ::testing::ElementsAre("versioned: echo called"));
}

TEST(PluginHostCall, UnknownPluginOrOperation_NotFoundNamingWhatExists) {
  TestFolder folder;
  folder.add("versioned_v1", "versioned.so");
  auto host = open_host(folder);
  FakeHostServices services;
  auto r1 = host->call("imdb", "get_rating", {}, {}, services, {});
  ASSERT_FALSE(r1.has_value());
  EXPECT_EQ(r1.error().code(), ErrorCode::kNotFound);
  EXPECT_THAT(r1.error().message(), HasSubstr("no plugin named 'imdb'"));
  EXPECT_THAT(r1.error().message(), HasSubstr("loaded: versioned"));
  auto r2 = host->call("versioned", "get_rating", {}, {}, services, {});
  ASSERT_FALSE(r2.has_value());
  EXPECT_EQ(r2.error().code(), ErrorCode::kNotFound);
  EXPECT_THAT(r2.error().message(), HasSubstr("has no operation 'get_rating' (it has: whoami, wait, echo)"));
}

}  // namespace
}  // namespace ratchet::plugin_host

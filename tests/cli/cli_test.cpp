// The ratchet command as a user runs it: the built binary as a child process
// against a temp database and the mock portal server in this process. Each
// test checks the exit code and what the command printed.
#include <arpa/inet.h>
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <netinet/in.h>
#include <signal.h>
#include <sys/socket.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <set>

#include <nlohmann/json.hpp>

#include "command_runner.hpp"
#include "mock_portal/server.hpp"
#include "ratchet_test_paths.hpp"

namespace ratchet::cli_test {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;

class RatchetCommandTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ratchet-cli-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    mock_portal::ServerOptions options;
    mock_portal::PortalOptions broken;
    broken.error_rate = 1.0;  // every sify call answers 5xx
    options.portals["sify"] = broken;
    auto server = mock_portal::MockPortalServer::start(options);
    ASSERT_TRUE(server.has_value()) << server.error().to_string();
    server_ = std::move(*server);
    config_ = (dir_ / "ratchet.toml").string();
    std::ofstream out(config_);
    out << "[engine]\ndatabase = \"jobs.db\"\nplugins = \"" << RATCHET_PLUGIN_DIR
        << "\"\nworkers = 4\npoll_interval = \"20ms\"\npark_threshold = \"20ms\"\n\n";
    for (const auto& p : mock_portal::portal_names()) {
      out << "[plugin." << p << "]\nbase_url = \"" << server_->portal_url(p) << "\"\n";
      out << "[plugin." << p << ".retry]\nattempts = 1\n\n";
    }
    out << "[job.rate_movie]\nattempts = 3\nsteps = [\n"
        << "  { name = \"imdb\", call = \"imdb.get_rating\", args = { name = \"{{args.name}}\" } },\n"
        << "  { name = \"rt\", call = \"rotten_tomatoes.get_rating\", args = { name = \"{{args.name}}\" } "
           "},\n"
        << "]\n\n"
        << "[job.rate_on_sify]\nattempts = 1\nsteps = [\n"
        << "  { name = \"sify\", call = \"sify.get_rating\", args = { name = \"{{args.name}}\" } },\n"
        << "]\n";
  }
  void TearDown() override {
    if (server_) server_->stop();
    fs::remove_all(dir_);
  }

  // `ratchet ARGS...`
  Outcome ratchet(std::vector<std::string> args, const std::vector<std::string>& env = {},
                  fs::path cwd = {}) {
    args.insert(args.begin(), tool_path("ratchet"));
    return run_command(args, cwd, env);
  }
  // `ratchet ARGS... -c CONFIG`
  Outcome with_config(std::vector<std::string> args) {
    args.push_back("-c");
    args.push_back(config_);
    return ratchet(std::move(args));
  }
  std::string enqueue(const std::string& type, const std::string& name, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"enqueue", type, "--arg", "name=" + name};
    args.insert(args.end(), extra.begin(), extra.end());
    auto o = with_config(args);
    EXPECT_EQ(o.exit_code, 0) << o.err;
    std::string id = o.out;
    while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
    return id;
  }
  nlohmann::json list_json(std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {"jobs", "list", "--json"};
    args.insert(args.end(), extra.begin(), extra.end());
    auto o = with_config(args);
    EXPECT_EQ(o.exit_code, 0) << o.err;
    return nlohmann::json::parse(o.out, nullptr, false);
  }

  fs::path dir_;
  std::string config_;
  std::unique_ptr<mock_portal::MockPortalServer> server_;
};

TEST_F(RatchetCommandTest, Version_PrintsVersionAndExitsZero) {
  auto o = ratchet({"version"});
  EXPECT_EQ(o.exit_code, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr("ratchet 0."));
  EXPECT_THAT(o.out, HasSubstr("libratchet"));
}

TEST_F(RatchetCommandTest, Help_ListsEveryCommandAndTheExitCodes) {
  auto o = ratchet({"--help"});
  EXPECT_EQ(o.exit_code, 0) << o.err;
  for (const char* cmd : {"run", "enqueue", "jobs", "plugins", "limits", "config", "version", "Exit codes"}) {
    EXPECT_THAT(o.out, HasSubstr(cmd));
  }
}

TEST_F(RatchetCommandTest, Help_EveryCommand_ExitsZeroAndNamesItsFlags) {
  const std::vector<std::pair<std::vector<std::string>, std::string>> cases = {
      {{"run", "--help"}, "--until-empty"},
      {{"enqueue", "--help"}, "--unique"},
      {{"jobs", "list", "--help"}, "--state"},
      {{"jobs", "show", "--help"}, "ID"},
      {{"jobs", "retry", "--help"}, "--dead"},
      {{"jobs", "cancel", "--help"}, "ID"},
      {{"jobs", "purge", "--help"}, "--older-than"},
      {{"plugins", "--help"}, "--json"},
      {{"limits", "--help"}, "--json"},
      {{"config", "check", "--help"}, "FILE"},
  };
  for (const auto& [args, flag] : cases) {
    auto o = ratchet(args);
    EXPECT_EQ(o.exit_code, 0) << args[0] << ": " << o.err;
    EXPECT_THAT(o.out, HasSubstr(flag)) << args[0];
  }
}

TEST_F(RatchetCommandTest, UnknownFlag_ExitsTwoPointingAtHelp) {
  auto o = ratchet({"jobs", "list", "--colour"});
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_THAT(o.err, HasSubstr("--colour"));
  EXPECT_THAT(o.err, HasSubstr("--help"));
}

TEST_F(RatchetCommandTest, MissingConfig_ExitsTwoNamingTheFileAndTheFix) {
  auto o = ratchet({"jobs", "list", "-c", (dir_ / "nope.toml").string()});
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_THAT(o.err, HasSubstr("nope.toml"));
  EXPECT_THAT(o.err, HasSubstr("RATCHET_CONFIG"));
  EXPECT_TRUE(o.out.empty()) << o.out;
}

TEST_F(RatchetCommandTest, DefaultConfig_ReadsRatchetTomlInTheCurrentFolder) {
  auto o = ratchet({"jobs", "list"}, {}, dir_);
  EXPECT_EQ(o.exit_code, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr("no jobs match"));
}

TEST_F(RatchetCommandTest, DefaultConfig_ReadsRatchetConfigFromTheEnvironment) {
  auto o = ratchet({"plugins"}, {"RATCHET_CONFIG=" + config_});
  EXPECT_EQ(o.exit_code, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr("imdb"));
}

TEST_F(RatchetCommandTest, ConfigCheck_ValidFile_PrintsASummaryAndExitsZero) {
  auto o = ratchet({"config", "check", config_});
  EXPECT_EQ(o.exit_code, 0) << o.err;
  EXPECT_THAT(o.out, HasSubstr("valid"));
  EXPECT_THAT(o.out, HasSubstr("rate_movie"));
  EXPECT_FALSE(fs::exists(dir_ / "jobs.db")) << "config check must not open the database";
}

TEST_F(RatchetCommandTest, ConfigCheck_InvalidFile_ListsEveryProblemAndExitsTwo) {
  auto bad = dir_ / "bad.toml";
  std::ofstream(bad) << "[engine]\nworkerz = 3\n[job.x]\nattempts = 0\nsteps = []\n";
  auto o = ratchet({"config", "check", bad.string()});
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_THAT(o.err, HasSubstr("bad.toml:2"));
  EXPECT_THAT(o.err, HasSubstr("workerz"));
  EXPECT_THAT(o.err, HasSubstr("attempts"));
}

TEST_F(RatchetCommandTest, ConfigCheck_SecretFromEnvironment_IsNeverPrinted) {
  std::string text;
  {
    std::ifstream in(config_);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  text.insert(text.find("[plugin.imdb]\n") + 14, "api_key = \"${RATCHET_TEST_KEY}\"\n");
  auto secret_config = dir_ / "secret.toml";
  std::ofstream(secret_config) << text;
  auto o = ratchet({"config", "check", secret_config.string()}, {"RATCHET_TEST_KEY=hunter2-secret"});
  EXPECT_EQ(o.exit_code, 0) << o.err;
  EXPECT_THAT(o.out + o.err, ::testing::Not(HasSubstr("hunter2-secret")));
  auto plugins =
      ratchet({"plugins", "--json", "-c", secret_config.string()}, {"RATCHET_TEST_KEY=hunter2-secret"});
  EXPECT_EQ(plugins.exit_code, 0) << plugins.err;
  EXPECT_THAT(plugins.out + plugins.err, ::testing::Not(HasSubstr("hunter2-secret")));
}

TEST_F(RatchetCommandTest, OpenWithInvalidConfig_ExitsTwoWithEveryProblem) {
  std::ofstream(config_, std::ios::app) << "\n[engine2]\nx = 1\n";
  auto o = with_config({"jobs", "list"});
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_THAT(o.err, HasSubstr("engine2"));
  EXPECT_THAT(o.err, HasSubstr("config check"));
}

TEST_F(RatchetCommandTest, Enqueue_UnknownJobType_ExitsTwoAndWritesNothing) {
  auto o = with_config({"enqueue", "rate_moovie", "--arg", "name=Heat"});
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_THAT(o.err, HasSubstr("rate_moovie"));
  EXPECT_TRUE(o.out.empty()) << o.out;
  EXPECT_TRUE(list_json().empty());
}

TEST_F(RatchetCommandTest, Enqueue_MissingArgument_ExitsTwoNamingTheTypeAndField) {
  auto o = with_config({"enqueue", "rate_movie", "--arg", "title=Heat"});
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_THAT(o.err, HasSubstr("rate_movie"));
  EXPECT_THAT(o.err, HasSubstr("name"));
  EXPECT_TRUE(list_json().empty());
}

TEST_F(RatchetCommandTest, Enqueue_MalformedArguments_ExitTwo) {
  for (const std::vector<std::string>& args :
       {std::vector<std::string>{"enqueue", "rate_movie", "--arg", "name"},
        std::vector<std::string>{"enqueue", "rate_movie", "--json", "[1,2]"},
        std::vector<std::string>{"enqueue", "rate_movie", "--arg", "name=Heat", "--in", "10"},
        std::vector<std::string>{"enqueue", "rate_movie", "--arg", "name=Heat", "--at", "tomorrow"},
        std::vector<std::string>{"enqueue", "rate_movie", "--arg", "name=Heat", "--json", "{}"}}) {
    auto o = with_config(args);
    EXPECT_EQ(o.exit_code, 2) << args.back() << ": " << o.err;
    EXPECT_FALSE(o.err.empty());
  }
  EXPECT_TRUE(list_json().empty());
}

TEST_F(RatchetCommandTest, EnqueueRunShow_HappyPath_JobsCompleteWithTheirSteps) {
  std::string first = enqueue("rate_movie", "Heat");
  enqueue("rate_movie", "Alien");
  auto json_enqueue =
      with_config({"enqueue", "rate_movie", "--json", R"({"name": "Up"})", "--priority", "1"});
  ASSERT_EQ(json_enqueue.exit_code, 0) << json_enqueue.err;

  auto run = with_config({"run", "--until-empty"});
  ASSERT_EQ(run.exit_code, 0) << run.err;
  EXPECT_THAT(run.err, HasSubstr("3 jobs finished"));

  auto jobs = list_json({"--state", "completed"});
  ASSERT_EQ(jobs.size(), 3u) << jobs.dump();
  EXPECT_EQ(jobs[0]["type"], "rate_movie");

  auto show = with_config({"jobs", "show", first});
  ASSERT_EQ(show.exit_code, 0) << show.err;
  EXPECT_THAT(show.out, HasSubstr("completed"));
  EXPECT_THAT(show.out, HasSubstr("Heat"));
  EXPECT_THAT(show.out, HasSubstr("imdb"));
  EXPECT_THAT(show.out, HasSubstr("rating"));
  EXPECT_THAT(show.out, HasSubstr("timeline"));

  auto shown = with_config({"jobs", "show", first, "--json"});
  ASSERT_EQ(shown.exit_code, 0) << shown.err;
  auto j = nlohmann::json::parse(shown.out);
  ASSERT_EQ(j["steps"].size(), 2u);
  EXPECT_TRUE(j["steps"][0]["output"].contains("rating"));
  EXPECT_EQ(server_->stats().portals.at("imdb").requests, 3);

  auto cancel = with_config({"jobs", "cancel", first});
  EXPECT_EQ(cancel.exit_code, 2) << "a completed job cannot be cancelled";
  EXPECT_THAT(cancel.err, HasSubstr("already ended"));
}

TEST_F(RatchetCommandTest, JobsShow_UnknownId_ExitsTwoNamingTheId) {
  auto o = with_config({"jobs", "show", "4242"});
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_THAT(o.err, HasSubstr("4242"));
  auto cancel = with_config({"jobs", "cancel", "4242"});
  EXPECT_EQ(cancel.exit_code, 2);
  auto retry = with_config({"jobs", "retry", "4242"});
  EXPECT_EQ(retry.exit_code, 2);
}

TEST_F(RatchetCommandTest, Run_JobEndsDead_ExitsOneAndRetryDeadRevivesIt) {
  std::string id = enqueue("rate_on_sify", "Heat");
  auto run = with_config({"run", "--until-empty"});
  EXPECT_EQ(run.exit_code, 1) << run.err;
  EXPECT_THAT(run.err, HasSubstr("dead"));
  auto dead = list_json({"--state", "dead"});
  ASSERT_EQ(dead.size(), 1u);
  EXPECT_FALSE(dead[0]["last_error"].get<std::string>().empty());

  auto retry = with_config({"jobs", "retry", "--dead"});
  EXPECT_EQ(retry.exit_code, 0) << retry.err;
  EXPECT_THAT(retry.out, HasSubstr("1 dead job"));
  EXPECT_EQ(list_json({"--state", "available"}).size(), 1u);
}

TEST_F(RatchetCommandTest, CancelRetryPurge_ScheduledJob_MovesThroughTheStates) {
  std::string id = enqueue("rate_movie", "Heat", {"--in", "1h", "--unique", "heat"});
  EXPECT_EQ(enqueue("rate_movie", "Heat", {"--unique", "heat"}), id) << "a unique key returns the live job";
  auto scheduled = list_json({"--state", "scheduled"});
  ASSERT_EQ(scheduled.size(), 1u);

  auto cancel = with_config({"jobs", "cancel", id});
  ASSERT_EQ(cancel.exit_code, 0) << cancel.err;
  EXPECT_THAT(cancel.out, HasSubstr("cancelled"));
  auto again = with_config({"jobs", "cancel", id});
  EXPECT_EQ(again.exit_code, 0) << "cancelling a cancelled job again is harmless";

  auto retry = with_config({"jobs", "retry", id});
  ASSERT_EQ(retry.exit_code, 0) << retry.err;
  ASSERT_EQ(with_config({"jobs", "cancel", id}).exit_code, 0);

  auto keep = with_config({"jobs", "purge", "--older-than", "1h", "--json"});
  ASSERT_EQ(keep.exit_code, 0) << keep.err;
  EXPECT_EQ(nlohmann::json::parse(keep.out)["purged"], 0);
  auto purge = with_config({"jobs", "purge", "--older-than", "0s"});
  ASSERT_EQ(purge.exit_code, 0) << purge.err;
  EXPECT_THAT(purge.out, HasSubstr("purged 1"));
  EXPECT_TRUE(list_json().empty());
  EXPECT_EQ(with_config({"jobs", "purge", "--older-than", "7"}).exit_code, 2);
}

TEST_F(RatchetCommandTest, JobsList_UnknownState_ExitsTwoListingTheStates) {
  auto o = with_config({"jobs", "list", "--state", "finished"});
  EXPECT_EQ(o.exit_code, 2);
  EXPECT_THAT(o.err, HasSubstr("completed"));
}

TEST_F(RatchetCommandTest, PluginsAndLimits_Json_ListTheLoadedPlugins) {
  auto plugins = with_config({"plugins", "--json"});
  ASSERT_EQ(plugins.exit_code, 0) << plugins.err;
  auto p = nlohmann::json::parse(plugins.out);
  std::set<std::string> names;
  for (const auto& plugin : p["loaded"]) names.insert(plugin["name"].get<std::string>());
  for (const auto& portal : mock_portal::portal_names()) EXPECT_TRUE(names.contains(portal)) << portal;

  auto text = with_config({"plugins"});
  EXPECT_EQ(text.exit_code, 0);
  EXPECT_THAT(text.out, HasSubstr("get_rating"));

  auto limits = with_config({"limits", "--json"});
  ASSERT_EQ(limits.exit_code, 0) << limits.err;
  EXPECT_TRUE(nlohmann::json::parse(limits.out).is_array());
}

// A free loopback port: bound by the server in the test process, then freed.
int free_port() {
  int fd = ::socket(AF_INET, SOCK_STREAM, 0);
  sockaddr_in addr{};
  addr.sin_family = AF_INET;
  addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
  socklen_t len = sizeof addr;
  int port = 0;
  if (::bind(fd, reinterpret_cast<sockaddr*>(&addr), sizeof addr) == 0 &&
      ::getsockname(fd, reinterpret_cast<sockaddr*>(&addr), &len) == 0) {
    port = ntohs(addr.sin_port);
  }
  ::close(fd);
  return port;
}

TEST_F(RatchetCommandTest, Run_MetricsHupAndTerm_ServesMetricsReloadsAndStopsCleanly) {
  enqueue("rate_movie", "Heat", {"--in", "1h"});
  int port = free_port();
  auto run = start_command({tool_path("ratchet"), "run", "-c", config_, "--metrics",
                            "127.0.0.1:" + std::to_string(port), "--status-every", "1s"});
  ASSERT_NE(run, nullptr);
  httplib::Client client("127.0.0.1", port);
  std::string body;
  for (int i = 0; i < 500 && body.empty(); ++i) {
    if (auto res = client.Get("/metrics"); res && res->status == 200) {
      body = res->body;
    } else {
      ::usleep(20000);
    }
  }
  EXPECT_THAT(body, HasSubstr("ratchet_jobs{state=\"scheduled\"} 1"));
  EXPECT_THAT(body, HasSubstr("ratchet_plugin_calls_total{plugin=\"imdb\"}"));

  ::kill(run->pid(), SIGHUP);
  for (int i = 0; i < 500 && run->err_so_far().find("reload") == std::string::npos; ++i) ::usleep(20000);
  ::kill(run->pid(), SIGTERM);
  auto o = run->wait();
  EXPECT_EQ(o.exit_code, 0) << o.err;
  EXPECT_THAT(o.err, HasSubstr("config reloaded"));
  EXPECT_THAT(o.err, HasSubstr("stopping"));
  EXPECT_EQ(list_json({"--state", "scheduled"}).size(), 1u) << "a stopped worker keeps the pending job";
}

}  // namespace
}  // namespace ratchet::cli_test

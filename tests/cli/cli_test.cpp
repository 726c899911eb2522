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
#include <functional>
#include <map>
#include <regex>
#include <set>
#include <sstream>

#include <nlohmann/json.hpp>

#include "command_runner.hpp"
#include "mock_portal/server.hpp"
#include "prometheus_text.hpp"
#include "ratchet_test_paths.hpp"

namespace ratchet::cli_test {
namespace {

namespace fs = std::filesystem;
using ::testing::HasSubstr;
using ::testing::Not;

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

// The footer says every command takes -c FILE: config check does too, and
// finds the file where the others do when none is named.
// A secret of a few characters cannot be masked without hiding ordinary
// text: `config check` says so, naming the setting, never the value.
TEST_F(RatchetCommandTest, ConfigCheck_ASecretUnderFourCharacters_IsWarnedAboutByName) {
  {
    std::ofstream out(config_, std::ios::app);
    out << "\n[plugin.http_json]\nurl = \"" << server_->portal_url("netflix")
        << "\"\nheaders = { X-Api-Key = \"${SHORT_TOKEN}\", X-Other = \"${LONG_TOKEN}\" }\n";
  }
  auto o = ratchet({"config", "check", config_}, {"SHORT_TOKEN=q7z", "LONG_TOKEN=a-long-enough-token"});
  EXPECT_EQ(o.exit_code, 0) << o.err;
  EXPECT_THAT(o.err,
              HasSubstr("warning: plugin.http_json.headers.X-Api-Key: the value from the environment has "
                        "only 3 characters"));
  EXPECT_THAT(o.err, Not(HasSubstr("X-Other")));
  EXPECT_THAT(o.out + o.err, Not(HasSubstr("q7z")));
}

TEST_F(RatchetCommandTest, ConfigCheck_TakesTheFileAsTheOtherCommandsDo) {
  auto flag = ratchet({"config", "check", "-c", config_});
  EXPECT_EQ(flag.exit_code, 0) << flag.err;
  EXPECT_THAT(flag.out, HasSubstr("valid"));
  auto env = ratchet({"config", "check"}, {"RATCHET_CONFIG=" + config_});
  EXPECT_EQ(env.exit_code, 0) << env.err;
  EXPECT_THAT(env.out, HasSubstr("valid"));
  auto here = ratchet({"config", "check"}, {}, dir_);
  EXPECT_EQ(here.exit_code, 0) << here.err;
  EXPECT_THAT(here.out, HasSubstr("ratchet.toml is valid"));
  fs::create_directories(dir_ / "elsewhere");
  auto none = ratchet({"config", "check"}, {}, dir_ / "elsewhere");
  EXPECT_EQ(none.exit_code, 2);
  EXPECT_THAT(none.err, HasSubstr("RATCHET_CONFIG"));
  auto both = ratchet({"config", "check", "-c", config_, (dir_ / "other.toml").string()});
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_THAT(both.err, HasSubstr("other.toml"));
}

TEST_F(RatchetCommandTest, ConfigFlag_BeforeTheCommandOrBetweenItsWords_IsTakenAsAfterIt) {
  // Run from a folder with no ratchet.toml: only the -c given can find it.
  fs::create_directories(dir_ / "elsewhere");
  const fs::path away = dir_ / "elsewhere";
  auto before = ratchet({"-c", config_, "limits"}, {}, away);
  EXPECT_EQ(before.exit_code, 0) << before.err;
  auto between = ratchet({"jobs", "-c", config_, "list"}, {}, away);
  EXPECT_EQ(between.exit_code, 0) << between.err;
  auto check = ratchet({"--config", config_, "config", "check"}, {}, away);
  EXPECT_EQ(check.exit_code, 0) << check.err;
  EXPECT_THAT(check.out, HasSubstr("valid"));
  // A file named on the command line wins over $RATCHET_CONFIG, wherever it is named.
  auto over_env =
      ratchet({"-c", config_, "plugins"}, {"RATCHET_CONFIG=" + (away / "none.toml").string()}, away);
  EXPECT_EQ(over_env.exit_code, 0) << over_env.err;
  // Two different files: which one was meant is not guessed.
  const std::string other = (away / "other.toml").string();
  auto both = ratchet({"-c", config_, "jobs", "list", "-c", other}, {}, away);
  EXPECT_EQ(both.exit_code, 2);
  EXPECT_THAT(both.err, HasSubstr("other.toml"));
  EXPECT_THAT(both.err, HasSubstr(fs::path(config_).filename().string()));
  auto same = ratchet({"-c", config_, "jobs", "list", "-c", config_}, {}, away);
  EXPECT_EQ(same.exit_code, 0) << same.err;
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

TEST_F(RatchetCommandTest, ConfigCheck_DirectoryNamedLikeAConfigFile_ExitsTwoSayingItIsNoFile) {
  fs::create_directories(dir_ / "x.toml");
  auto o = ratchet({"config", "check", (dir_ / "x.toml").string()});
  EXPECT_EQ(o.exit_code, 2) << o.out;
  EXPECT_THAT(o.err, HasSubstr("x.toml"));
  EXPECT_THAT(o.err, HasSubstr("directory"));
  EXPECT_THAT(o.out, ::testing::Not(HasSubstr("valid")));
  auto list = ratchet({"jobs", "list", "-c", (dir_ / "x.toml").string()});
  EXPECT_EQ(list.exit_code, 2) << list.out;
  EXPECT_THAT(list.err, HasSubstr("directory"));
}

// The fixture's file with `extra` appended, as `name` in the test folder.
std::string config_with(const std::string& base, const std::string& name, const std::string& extra) {
  std::string text;
  {
    std::ifstream in(base);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  auto file = fs::path(base).parent_path() / name;
  std::ofstream(file) << text << extra;
  return file.string();
}

// The 1-based line of the first line of `file` that holds `text`.
int line_of(const std::string& file, const std::string& text) {
  std::ifstream in(file);
  std::string line;
  for (int n = 1; std::getline(in, line); ++n) {
    if (line.find(text) != std::string::npos) return n;
  }
  return 0;
}

TEST_F(RatchetCommandTest, ConfigCheck_StepCallsAPluginNoFileProvides_ExitsTwoNamingFileLineAndKey) {
  auto bad = config_with(config_, "ghost.toml",
                         "\n[job.haunt]\nsteps = [\n  { name = \"boo\", call = \"ghost.fetch\" },\n]\n");
  const int line = line_of(bad, "ghost.fetch");
  auto o = ratchet({"config", "check", bad});
  EXPECT_EQ(o.exit_code, 2) << o.out;
  EXPECT_THAT(o.err, HasSubstr("ghost.toml:" + std::to_string(line) + ":"));
  EXPECT_THAT(o.err, HasSubstr("job.haunt.steps[0]"));
  EXPECT_THAT(o.err, HasSubstr("ghost"));
  EXPECT_THAT(o.err, HasSubstr("[plugin.ghost]")) << "it says the file has no table for it";
  EXPECT_NE(with_config({"jobs", "list"}).exit_code, 2) << "the fixture's own file is fine";
  EXPECT_EQ(ratchet({"run", "--until-empty", "-c", bad}).exit_code, 2) << "open refuses it as well";
}

TEST_F(RatchetCommandTest, ConfigCheck_StepCallsAnOperationThePluginLacks_ExitsTwoListingWhatItHas) {
  auto bad = config_with(config_, "typo.toml",
                         "\n[job.typo]\nsteps = [\n  { name = \"a\", call = \"imdb.get_ratin\" },\n]\n");
  const int line = line_of(bad, "imdb.get_ratin\"");
  auto o = ratchet({"config", "check", bad});
  EXPECT_EQ(o.exit_code, 2) << o.out;
  EXPECT_THAT(o.err, HasSubstr("typo.toml:" + std::to_string(line) + ":"));
  EXPECT_THAT(o.err, HasSubstr("job.typo.steps[0]"));
  EXPECT_THAT(o.err, HasSubstr("\"get_ratin\""));
  EXPECT_THAT(o.err, HasSubstr("get_rating")) << "it lists the operations imdb has";
}

TEST_F(RatchetCommandTest, ConfigCheck_ConfiguredPluginWithoutFile_ExitsTwoNamingItsTable) {
  auto bad = config_with(config_, "unprovided.toml", "\n[plugin.ghost]\nbase_url = \"http://127.0.0.1:1\"\n");
  const int line = line_of(bad, "[plugin.ghost]");
  auto o = ratchet({"config", "check", bad});
  EXPECT_EQ(o.exit_code, 2) << o.out;
  EXPECT_THAT(o.err, HasSubstr("unprovided.toml:" + std::to_string(line) + ":"));
  EXPECT_THAT(o.err, HasSubstr("plugin.ghost"));
}

TEST_F(RatchetCommandTest, ConfigCheck_PluginFileThatFailsToLoad_IsReportedWithFileAndReason) {
  fs::create_directories(dir_ / "plugins");
  fs::copy_file(fs::path(RATCHET_PLUGIN_DIR) / "imdb.so", dir_ / "plugins" / "imdb.so");
  std::ofstream(dir_ / "plugins" / "broken.so") << "not a shared library\n";
  auto file = dir_ / "own_folder.toml";
  std::ofstream(file) << "[engine]\nplugins = \"plugins\"\n[plugin.imdb]\nbase_url = \"http://127.0.0.1:1\"\n"
                      << "[job.j]\nsteps = [{ name = \"a\", call = \"imdb.get_rating\" }]\n";
  auto ok = ratchet({"config", "check", file.string()});
  EXPECT_EQ(ok.exit_code, 0) << ok.err << "a file nothing needs does not stop the engine";
  EXPECT_THAT(ok.err, HasSubstr("broken.so: "));
  EXPECT_THAT(ok.out, HasSubstr("valid"));

  // A step calling a plugin that file may have been meant to provide: the
  // problem, and the refused file with its reason.
  std::ofstream(file, std::ios::app) << "[job.k]\nsteps = [{ name = \"b\", call = \"broken.go\" }]\n";
  auto bad = ratchet({"config", "check", file.string()});
  EXPECT_EQ(bad.exit_code, 2) << bad.out;
  EXPECT_THAT(bad.err, HasSubstr("job.k.steps[0]"));
  EXPECT_THAT(bad.err, HasSubstr("broken.so: "));
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

// Text that is no JSON was reported as "must be a JSON object", with the
// raw bytes (invalid UTF-8 included) echoed to the terminal.
TEST_F(RatchetCommandTest, Enqueue_JsonThatIsNotJson_SaysWhereAndShowsNoRawBytes) {
  auto nan = with_config({"enqueue", "rate_movie", "--json", "{\"name\": NaN}"});
  EXPECT_EQ(nan.exit_code, 2);
  EXPECT_THAT(nan.err, HasSubstr("--json is not valid JSON text: at byte 10"));
  auto bytes = with_config({"enqueue", "rate_movie", "--json", "{\"name\": \"\xff\x1b[31m\"}"});
  EXPECT_EQ(bytes.exit_code, 2);
  EXPECT_THAT(bytes.err, HasSubstr("--json is not valid JSON text"));
  EXPECT_THAT(bytes.err, HasSubstr("\\xff"));
  EXPECT_EQ(bytes.err.find('\x1b'), std::string::npos) << "no terminal escape reaches stderr";
  EXPECT_EQ(bytes.err.find('\xff'), std::string::npos);
  auto array = with_config({"enqueue", "rate_movie", "--json", "[1,2]"});
  EXPECT_THAT(array.err, HasSubstr("--json must be a JSON object, not array"));
  EXPECT_TRUE(list_json().empty());
}

TEST_F(RatchetCommandTest, Enqueue_ArgumentsNestedTooDeepOrNotUtf8_ExitTwoNamingTheTypeAndField) {
  {
    std::ofstream out(config_, std::ios::app);
    out << "\n[job.rate_year]\nargs = { name = \"string\", year = \"integer\" }\nsteps = [\n"
        << "  { name = \"imdb\", call = \"imdb.get_rating\", args = { name = \"{{args.name}}\" } },\n]\n";
  }
  std::string deep(60'000, '[');
  deep += std::string(60'000, ']');
  auto nested = with_config({"enqueue", "rate_movie", "--arg", "name:=" + deep});
  EXPECT_EQ(nested.exit_code, 2) << nested.err;
  EXPECT_THAT(nested.err, HasSubstr("rate_movie"));
  EXPECT_THAT(nested.err, HasSubstr("argument \"name\""));
  EXPECT_THAT(nested.err, HasSubstr("64 levels"));
  auto utf8 = with_config({"enqueue", "rate_year", "--arg", "name=Heat", "--arg", "year=19\xff\xfe"});
  EXPECT_EQ(utf8.exit_code, 2) << utf8.err;
  EXPECT_THAT(utf8.err, HasSubstr("rate_year"));
  EXPECT_THAT(utf8.err, HasSubstr("argument \"year\""));
  EXPECT_THAT(utf8.err, HasSubstr("UTF-8"));
  EXPECT_THAT(utf8.err, Not(HasSubstr("internal")));
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

// A span or a time past what 64 bits of nanoseconds hold wrapped: a purge
// of jobs "older than 213503d" deleted one that had just finished, and a
// job due in the year 9999 ran at once. Each is refused now, and nothing is
// written or deleted; so is a date that does not exist.
TEST_F(RatchetCommandTest, SpansAndTimesPastWhatRatchetHolds_ExitTwoAndChangeNothing) {
  std::string id = enqueue("rate_movie", "Heat", {"--in", "1h"});
  ASSERT_EQ(with_config({"jobs", "cancel", id}).exit_code, 0);
  for (const std::vector<std::string>& args : {
           std::vector<std::string>{"jobs", "purge", "--older-than", "213503d"},
           std::vector<std::string>{"jobs", "purge", "--older-than", "36501d"},
           std::vector<std::string>{"enqueue", "rate_movie", "--arg", "name=F", "--at", "@9999999999"},
           std::vector<std::string>{"enqueue", "rate_movie", "--arg", "name=G", "--at",
                                    "9999-12-31T23:59:59Z"},
           std::vector<std::string>{"enqueue", "rate_movie", "--arg", "name=H", "--in", "213503d"},
           std::vector<std::string>{"enqueue", "rate_movie", "--arg", "name=I", "--at",
                                    "2026-02-30T00:00:00Z"},
           std::vector<std::string>{"enqueue", "rate_movie", "--arg", "name=J", "--at",
                                    "2026-02-01T00:00:00+25:00"},
       }) {
    auto o = with_config(args);
    EXPECT_EQ(o.exit_code, 2) << args[3] << ": " << o.out << o.err;
    EXPECT_THAT(o.err, HasSubstr(args[2] == "--older-than" ? "--older-than" : args[4])) << o.err;
  }
  auto jobs = list_json();
  ASSERT_EQ(jobs.size(), 1u) << "nothing enqueued, nothing purged";
  EXPECT_EQ(jobs[0]["state"], "cancelled");
  // The longest span taken still works, both ways.
  EXPECT_EQ(with_config({"jobs", "purge", "--older-than", "36500d"}).exit_code, 0);
  EXPECT_EQ(list_json().size(), 1u);
  ASSERT_EQ(with_config({"enqueue", "rate_movie", "--arg", "name=K", "--in", "36500d"}).exit_code, 0);
  EXPECT_EQ(list_json({"--state", "scheduled"}).size(), 1u);
}

// Each worker is a thread: `--workers 100000` ran the machine out of them
// (killed, or "internal error: Resource temporarily unavailable").
TEST_F(RatchetCommandTest, Run_WorkersBeyondTheConfigsBound_ExitTwoBeforeStarting) {
  enqueue("rate_movie", "Heat");
  for (const std::string n : {"100000", "1025", "0"}) {
    auto o = with_config({"run", "--until-empty", "--workers", n});
    EXPECT_EQ(o.exit_code, 2) << n << ": " << o.err;
    EXPECT_THAT(o.err, HasSubstr("--workers must be between 1 and 1024, got " + n));
  }
  EXPECT_EQ(list_json({"--state", "available"}).size(), 1u) << "nothing ran";
}

// A job of a type this config does not declare waits for a process whose
// config does; counting it, --until-empty ran for ever, saying nothing.
TEST_F(RatchetCommandTest, RunUntilEmpty_OnlyJobsOfTypesItDoesNotRun_EndsNamingThem) {
  enqueue("rate_movie", "Heat");
  const std::string other = (dir_ / "other.toml").string();
  {
    std::ofstream out(other);
    out << "[engine]\ndatabase = \"jobs.db\"\nplugins = \"" << RATCHET_PLUGIN_DIR << "\"\n"
        << "[plugin.imdb]\nbase_url = \"" << server_->portal_url("imdb") << "\"\n"
        << "[job.other]\nsteps = [{ name = \"imdb\", call = \"imdb.get_rating\", args = { name = \"x\" } "
           "}]\n";
  }
  auto o = run_command({tool_path("ratchet"), "run", "--until-empty", "--progress", "never", "-c", other}, {},
                       {}, 20000);
  EXPECT_EQ(o.exit_code, 0) << o.err;
  EXPECT_THAT(o.err + o.out, HasSubstr("1 pending job is of job types or queues this config does not run"));
  auto jobs = list_json();
  ASSERT_EQ(jobs.size(), 1u);
  EXPECT_EQ(jobs[0]["state"], "available") << "left for a process that runs its type";
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

TEST_F(RatchetCommandTest, Limits_DeclaredLimit_IsListedBeforeAnyCall) {
  std::ofstream(config_, std::ios::app) << "\n[[plugin.imdb.limit]]\nrate = 7\nper = \"1s\"\n";
  auto limits = with_config({"limits", "--json"});
  ASSERT_EQ(limits.exit_code, 0) << limits.err;
  auto j = nlohmann::json::parse(limits.out);
  ASSERT_TRUE(j.is_array()) << limits.out;
  bool listed = false;
  for (const auto& l : j) {
    listed = listed || (l["plugin"] == "imdb" && l["declared"].get<std::string>().find("7/1s") == 0);
  }
  EXPECT_TRUE(listed) << limits.out;
}

TEST_F(RatchetCommandTest, JobsEnqueueAndLimits_ConfiguredPluginFileMissing_WorkWithoutPluginCode) {
  // ghost is configured, with a limit kept in the database, but no file
  // provides it: only running jobs needs plugin code.
  auto ghost = config_with(config_, "ghost.toml",
                           "\n[plugin.ghost]\nbase_url = \"http://127.0.0.1:1\"\n"
                           "[[plugin.ghost.limit]]\nrate = 3\nper = \"1m\"\nscope = \"database\"\n"
                           "[job.haunt]\nsteps = [{ name = \"boo\", call = \"ghost.fetch\" }]\n");
  auto cmd = [&](std::vector<std::string> args) {
    args.push_back("-c");
    args.push_back(ghost);
    return ratchet(std::move(args));
  };
  auto id_of = [](const Outcome& o) {
    std::string id = o.out;
    while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
    return id;
  };
  auto first = cmd({"enqueue", "rate_movie", "--arg", "name=Heat"});
  ASSERT_EQ(first.exit_code, 0) << first.err;
  const std::string id = id_of(first);
  auto second = cmd({"enqueue", "haunt", "--json", "{}"});
  ASSERT_EQ(second.exit_code, 0) << second.err;
  auto bad_arg = cmd({"enqueue", "rate_movie", "--arg", "title=Heat"});
  EXPECT_EQ(bad_arg.exit_code, 2) << "arguments are still checked against the job type";
  EXPECT_THAT(bad_arg.err, HasSubstr("name"));
  auto unknown = cmd({"enqueue", "rate_moovie", "--arg", "name=Heat"});
  EXPECT_EQ(unknown.exit_code, 2);

  auto list = cmd({"jobs", "list", "--json"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  EXPECT_EQ(nlohmann::json::parse(list.out).size(), 2u) << list.out;
  auto show = cmd({"jobs", "show", id});
  EXPECT_EQ(show.exit_code, 0) << show.err;
  EXPECT_THAT(show.out, HasSubstr("Heat"));
  auto cancel = cmd({"jobs", "cancel", id});
  EXPECT_EQ(cancel.exit_code, 0) << cancel.err;
  auto retry = cmd({"jobs", "retry", id});
  EXPECT_EQ(retry.exit_code, 0) << retry.err;
  auto retry_dead = cmd({"jobs", "retry", "--dead"});
  EXPECT_EQ(retry_dead.exit_code, 0) << retry_dead.err;
  ASSERT_EQ(cmd({"jobs", "cancel", id}).exit_code, 0);
  auto purge = cmd({"jobs", "purge", "--older-than", "0s"});
  EXPECT_EQ(purge.exit_code, 0) << purge.err;
  EXPECT_THAT(purge.out, HasSubstr("purged 1"));

  auto limits = cmd({"limits", "--json"});
  ASSERT_EQ(limits.exit_code, 0) << limits.err;
  EXPECT_THAT(limits.out, HasSubstr("ghost"));
  EXPECT_THAT(limits.out, HasSubstr("3/1m"));
  auto limits_text = cmd({"limits"});
  EXPECT_EQ(limits_text.exit_code, 0) << limits_text.err;

  auto run = cmd({"run", "--until-empty"});
  EXPECT_EQ(run.exit_code, 2) << run.err;
  EXPECT_THAT(run.err, HasSubstr("ghost"));
  EXPECT_THAT(run.err, HasSubstr("[plugin.ghost]"));
  auto pending = cmd({"jobs", "list", "--json"});
  ASSERT_EQ(pending.exit_code, 0) << pending.err;
  EXPECT_EQ(nlohmann::json::parse(pending.out).size(), 1u) << "the refused run touched no job";
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
  EXPECT_THAT(
      raw_exchange(port, "POST /metrics HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Length: 1048576\r\n\r\n"),
      ::testing::StartsWith("HTTP/1.1 413"))
      << "a body over 64 KiB is refused before it is read";

  ::kill(run->pid(), SIGHUP);
  for (int i = 0; i < 500 && run->err_so_far().find("reload") == std::string::npos; ++i) ::usleep(20000);
  ::kill(run->pid(), SIGTERM);
  auto o = run->wait();
  EXPECT_EQ(o.exit_code, 0) << o.err;
  EXPECT_THAT(o.err, HasSubstr("config reloaded"));
  EXPECT_THAT(o.err, HasSubstr("stopping"));
  EXPECT_EQ(list_json({"--state", "scheduled"}).size(), 1u) << "a stopped worker keeps the pending job";
}

// GET /metrics of a `ratchet run` until `ready` holds for the body (the run
// starts serving, jobs get where the test wants them); the last body.
std::string scrape_until(int port, const std::function<bool(const std::string&)>& ready) {
  httplib::Client client("127.0.0.1", port);
  std::string body;
  for (int i = 0; i < 1000; ++i) {
    if (auto res = client.Get("/metrics"); res && res->status == 200) {
      body = res->body;
      if (ready(body)) break;
    }
    ::usleep(20000);
  }
  return body;
}

TEST_F(RatchetCommandTest, RunMetrics_JobParkedBehindALimit_ShowsParkedWaitsAndDurationsUntilCancelled) {
  // imdb admits one call an hour: of two films rated at once, one parks.
  std::ofstream(config_, std::ios::app) << "\n[[plugin.imdb.limit]]\nrate = 1\nper = \"1h\"\n";
  enqueue("rate_movie", "Heat");
  enqueue("rate_movie", "Alien");
  int port = free_port();
  auto run =
      start_command({tool_path("ratchet"), "run", "-c", config_, "--metrics",
                     "127.0.0.1:" + std::to_string(port), "--progress", "never", "--status-every", "100ms"});
  ASSERT_NE(run, nullptr);

  // Scheduled: the parked film's run has ended (its rotten_tomatoes step,
  // which runs beside the imdb one, has finished too). That step may itself
  // wait a moment: rotten_tomatoes declares no limit, so its second call
  // waits for the first one's reply, and can still be on its way when the
  // first film completes.
  const std::string parked_body = scrape_until(port, [](const std::string& b) {
    return b.find("ratchet_jobs{state=\"completed\"} 1\n") != std::string::npos &&
           b.find("ratchet_jobs{state=\"scheduled\"} 1\n") != std::string::npos &&
           b.find("ratchet_plugin_parked_steps{plugin=\"imdb\"} 1\n") != std::string::npos &&
           value_of(parse_samples(b), "ratchet_plugin_calls_total", {{"plugin", "rotten_tomatoes"}}) == 2;
  });
  const auto parked = parse_samples(parked_body);
  EXPECT_EQ(value_of(parked, "ratchet_plugin_parked_steps", {{"plugin", "imdb"}}), 1) << parked_body;
  EXPECT_EQ(value_of(parked, "ratchet_plugin_parked_steps", {{"plugin", "rotten_tomatoes"}}), 0);
  EXPECT_GE(value_of(parked, "ratchet_plugin_parks_total", {{"plugin", "imdb"}}), 1);
  const double waited = value_of(parked, "ratchet_plugin_limiter_wait_seconds_total", {{"plugin", "imdb"}});
  EXPECT_GT(waited, 0) << "the parked film is waiting for imdb's slot";
  EXPECT_LT(waited, 600);
  const double unlimited =
      value_of(parked, "ratchet_plugin_limiter_wait_seconds_total", {{"plugin", "rotten_tomatoes"}});
  EXPECT_GE(unlimited, 0);
  EXPECT_LT(unlimited, 1) << "rotten_tomatoes declares no limit";

  // Both films' rotten_tomatoes steps and the first film's imdb step ended,
  // each with the one call it made; every portal has the series.
  const std::map<std::string, double> steps_done = {
      {"imdb", 1}, {"rotten_tomatoes", 2}, {"sify", 0}, {"netflix", 0}, {"amazon_prime", 0}};
  for (const auto& [plugin, done] : steps_done) {
    const std::map<std::string, std::string> labels = {{"plugin", plugin}, {"operation", "get_rating"}};
    const double count = value_of(parked, "ratchet_step_duration_seconds_count", labels);
    EXPECT_EQ(count, done) << plugin;
    EXPECT_EQ(count, value_of(parked, "ratchet_plugin_calls_total", {{"plugin", plugin}})) << plugin;
    const double sum = value_of(parked, "ratchet_step_duration_seconds_sum", labels);
    EXPECT_GE(sum, 0) << plugin;
    EXPECT_LT(sum, 60) << plugin;
    const auto buckets = buckets_of(parked, "ratchet_step_duration_seconds", labels);
    ASSERT_GT(buckets.size(), 1u) << plugin;
    for (std::size_t i = 1; i < buckets.size(); ++i) {
      EXPECT_GE(buckets[i].value, buckets[i - 1].value) << plugin << " le=" << buckets[i].labels.at("le");
    }
    EXPECT_EQ(buckets.back().labels.at("le"), "+Inf") << plugin;
    EXPECT_EQ(buckets.back().value, count) << plugin;
  }

  for (int i = 0; i < 500 && run->err_so_far().find("parked: imdb 1") == std::string::npos; ++i)
    ::usleep(20000);
  EXPECT_THAT(run->err_so_far(), HasSubstr("parked: imdb 1"));

  // Cancelled by another process, the job no longer counts as parked.
  auto scheduled = list_json({"--state", "scheduled"});
  ASSERT_EQ(scheduled.size(), 1u) << scheduled.dump();
  auto cancel = with_config({"jobs", "cancel", std::to_string(scheduled[0]["id"].get<std::int64_t>())});
  ASSERT_EQ(cancel.exit_code, 0) << cancel.err;
  const std::string cancelled_body = scrape_until(port, [](const std::string& b) {
    return b.find("ratchet_plugin_parked_steps{plugin=\"imdb\"} 0\n") != std::string::npos;
  });
  const auto cancelled = parse_samples(cancelled_body);
  EXPECT_EQ(value_of(cancelled, "ratchet_plugin_parked_steps", {{"plugin", "imdb"}}), 0) << cancelled_body;
  EXPECT_EQ(value_of(cancelled, "ratchet_jobs", {{"state", "cancelled"}}), 1);
  EXPECT_GE(value_of(cancelled, "ratchet_plugin_limiter_wait_seconds_total", {{"plugin", "imdb"}}), waited)
      << "a counter never goes down";

  ::kill(run->pid(), SIGTERM);
  auto o = run->wait();
  EXPECT_EQ(o.exit_code, 0) << o.err;
}

// ------------------------------------------------- README against --help

// What `ratchet ... --help` lists: its long options and its subcommands.
struct Help {
  std::set<std::string> options;
  std::vector<std::string> subcommands;
};

Help parse_help(const std::string& text) {
  Help h;
  std::istringstream in(text);
  std::string line, section;
  while (std::getline(in, line)) {
    if (line.empty()) {
      section.clear();
    } else if (line.back() == ':' && line.find(' ') == std::string::npos) {
      section = line;
    } else if (section == "Options:" && line.starts_with("  -")) {
      // "  -c,--config TEXT ...": the names end at the first space.
      std::istringstream names(line.substr(2, line.find(' ', 2) - 2));
      std::string name;
      while (std::getline(names, name, ',')) {
        if (name.starts_with("--")) h.options.insert(name);
      }
    } else if (section == "Subcommands:" && line.starts_with("  ") && line[2] != ' ') {
      h.subcommands.push_back(line.substr(2, line.find(' ', 2) - 2));
    }
  }
  return h;
}

// The code the README shows: each inline code span and each line of a code
// block, with the table row (or line) it stands in and its section.
struct Code {
  std::string text;
  std::string line;
  int number = 0;
  std::string section;  // the "## ..." heading above it
};

std::vector<Code> readme_code(const std::string& readme) {
  std::vector<Code> out;
  std::istringstream in(readme);
  std::string line;
  bool fenced = false;
  int number = 0;
  std::string section;
  while (std::getline(in, line)) {
    ++number;
    if (line.find("```") != std::string::npos) {
      fenced = !fenced;
      continue;
    }
    if (!fenced && line.starts_with("## ")) section = line;
    if (fenced || line.starts_with("    ")) {
      out.push_back({line, line, number, section});
      continue;
    }
    for (std::size_t open = line.find('`'); open != std::string::npos;) {
      std::size_t close = line.find('`', open + 1);
      if (close == std::string::npos) break;
      out.push_back({line.substr(open + 1, close - open - 1), line, number, section});
      open = line.find('`', close + 1);
    }
  }
  return out;
}

std::string joined(const std::vector<std::string>& path) {
  std::string out = "ratchet";
  for (const auto& p : path) out += " " + p;
  return out;
}

TEST_F(RatchetCommandTest, Readme_CommandsAndLongOptions_AgreeWithTheHelpOfEveryCommand) {
  // The help of every command, found from `ratchet --help` down.
  std::map<std::vector<std::string>, Help> helps;
  std::vector<std::vector<std::string>> todo = {{}};
  while (!todo.empty()) {
    auto path = todo.back();
    todo.pop_back();
    auto args = path;
    args.push_back("--help");
    auto o = ratchet(args);
    ASSERT_EQ(o.exit_code, 0) << joined(path) << " --help: " << o.err;
    Help h = parse_help(o.out);
    ASSERT_FALSE(h.options.empty()) << joined(path) << " --help lists no option:\n" << o.out;
    for (const auto& sub : h.subcommands) {
      auto deeper = path;
      deeper.push_back(sub);
      todo.push_back(deeper);
    }
    helps[path] = std::move(h);
  }
  ASSERT_GT(helps.size(), 7u) << "ratchet --help lists too few commands";
  std::set<std::string> any_option;
  for (const auto& [path, h] : helps) any_option.insert(h.options.begin(), h.options.end());

  std::ifstream file(fs::path(RATCHET_SOURCE_DIR) / "README.md");
  ASSERT_TRUE(file) << "README.md not found in " << RATCHET_SOURCE_DIR;
  const std::string readme((std::istreambuf_iterator<char>(file)), {});
  const std::regex long_option("--[a-z][a-z0-9-]*");
  // "ratchet " at the start of the code or after a space or a folder: not
  // ratchet-demo, ratchet::Engine or find_package(ratchet ...).
  const std::regex mention("(^|[\\s/])ratchet ([^`]*)");

  std::set<std::vector<std::string>> mentioned;
  const auto codes = readme_code(readme);
  ASSERT_TRUE(std::ranges::any_of(codes, [](const Code& c) {
    return c.section == "## The `ratchet` command";
  })) << "README.md has no section \"## The `ratchet` command\"";
  for (const auto& code : codes) {
    const std::string where = "README.md:" + std::to_string(code.number) + ": `" + code.text + "`";
    // The command's own section names options on their own too (other
    // sections show cmake's and the demo's).
    if (code.section == "## The `ratchet` command") {
      for (auto m = std::sregex_iterator(code.text.begin(), code.text.end(), long_option);
           m != std::sregex_iterator(); ++m) {
        EXPECT_TRUE(any_option.contains(m->str())) << where << ": no command has " << m->str();
      }
    }
    std::smatch found;
    if (!std::regex_search(code.text, found, mention)) continue;
    // The command: the words that name subcommands, from the top down. A
    // plain word where subcommands are expected must be one of them.
    std::vector<std::string> path;
    std::istringstream words(found[2].str());
    std::string word;
    while (words >> word) {
      const auto& subs = helps.at(path).subcommands;
      if (std::ranges::find(subs, word) != subs.end()) {
        path.push_back(word);
        mentioned.insert(path);
        continue;
      }
      const bool plain_word = std::regex_match(word, std::regex("[a-z]+"));
      EXPECT_FALSE(plain_word && !subs.empty())
          << where << ": " << joined(path) << " has no subcommand " << word;
      break;
    }
    // Its long options, in the mention and in the rest of its table row, are
    // its own or a parent's (global options go anywhere).
    const std::string scope = code.line.starts_with("|") ? code.line : found[2].str();
    for (auto m = std::sregex_iterator(scope.begin(), scope.end(), long_option); m != std::sregex_iterator();
         ++m) {
      bool known = false;
      for (auto prefix = path;; prefix.pop_back()) {
        known = known || helps.at(prefix).options.contains(m->str());
        if (prefix.empty()) break;
      }
      EXPECT_TRUE(known) << where << ": " << joined(path) << " --help lists no " << m->str();
    }
  }
  for (const auto& [path, h] : helps) {
    if (!path.empty()) {
      EXPECT_TRUE(mentioned.contains(path)) << "README.md never shows `" << joined(path) << "`";
    }
  }
}

}  // namespace
}  // namespace ratchet::cli_test

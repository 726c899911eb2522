// The fixture of the `ratchet web` tests: the command as a child process
// over a temp database (a SQLite file, or a PostgreSQL schema where
// database() says so) that another child process, `ratchet run`, works at
// the same time, against the mock portal server in this process. The tests
// speak HTTP to it as a script or a browser would.
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <functional>
#include <regex>
#include <set>
#include <thread>

#include <nlohmann/json.hpp>

#include "command_runner.hpp"
#include "mock_portal/server.hpp"
#include "ratchet_test_paths.hpp"

namespace ratchet::cli_test {

namespace web_fixture {
namespace fs = std::filesystem;
using json = nlohmann::json;
using ::testing::HasSubstr;
using ::testing::Not;

inline constexpr const char* kToken = "web-test-token-0123456789abcdef";
inline constexpr const char* kSecret = "hunter2-plugin-secret";

inline std::set<std::string> states_of(const json& page) {
  std::set<std::string> out;
  for (const auto& j : page["jobs"]) out.insert(j["state"].get<std::string>());
  return out;
}

class RatchetWebTest : public ::testing::Test {
 protected:
  // Where the jobs are kept: a file in the test's folder by default.
  virtual std::string database() { return "jobs.db"; }

  void SetUp() override {
    dir_ = fs::temp_directory_path() / ("ratchet-web-" + std::to_string(::getpid()) + "-" +
                                        ::testing::UnitTest::GetInstance()->current_test_info()->name());
    fs::remove_all(dir_);
    fs::create_directories(dir_);
    mock_portal::ServerOptions options;
    mock_portal::PortalOptions broken;
    broken.error_rate = 1.0;  // every sify call answers 5xx: its jobs die
    options.portals["sify"] = broken;
    auto server = mock_portal::MockPortalServer::start(options);
    ASSERT_TRUE(server.has_value()) << server.error().to_string();
    portals_ = std::move(*server);
    config_ = (dir_ / "ratchet.toml").string();
    std::ofstream out(config_);
    out << "[engine]\ndatabase = \"" << database() << "\"\nplugins = \"" << RATCHET_PLUGIN_DIR
        << "\"\nworkers = 4\npoll_interval = \"20ms\"\npark_threshold = \"20ms\"\n\n";
    for (const std::string p : {"imdb", "sify"}) {
      out << "[plugin." << p << "]\nbase_url = \"" << portals_->portal_url(p) << "\"\n";
      if (p == "imdb") out << "api_key = \"${RATCHET_WEB_TEST_KEY}\"\n";
      out << "[plugin." << p << ".retry]\nattempts = 1\n\n";
    }
    out << "[job.rate_movie]\nattempts = 3\nsteps = [\n"
        << "  { name = \"imdb\", call = \"imdb.get_rating\", args = { name = \"{{args.name}}\" } },\n"
        << "]\n\n"
        << "[job.rate_on_sify]\nattempts = 1\nsteps = [\n"
        << "  { name = \"sify\", call = \"sify.get_rating\", args = { name = \"{{args.name}}\" } },\n"
        << "]\n";
    ::setenv("RATCHET_WEB_TEST_KEY", kSecret, 1);
    ::setenv("RATCHET_WEB_TEST_TOKEN", kToken, 1);
  }
  void TearDown() override {
    web_.reset();
    if (portals_) portals_->stop();
    fs::remove_all(dir_);
  }

  std::string enqueue(const std::string& type, const std::string& name, std::vector<std::string> extra = {}) {
    std::vector<std::string> args = {tool_path("ratchet"), "enqueue", type,   "--arg",
                                     "name=" + name,       "-c",      config_};
    args.insert(args.end(), extra.begin(), extra.end());
    auto o = run_command(args);
    EXPECT_EQ(o.exit_code, 0) << o.err;
    std::string id = o.out;
    while (!id.empty() && (id.back() == '\n' || id.back() == ' ')) id.pop_back();
    return id;
  }

  // Starts `ratchet web` with `flags` on a free port and waits until it
  // answers.
  void start_web(std::vector<std::string> flags, const std::string& host = "127.0.0.1") {
    port_ = free_port();
    std::vector<std::string> argv = {
        tool_path("ratchet"), "web", "-c", config_, "--listen", host + ":" + std::to_string(port_)};
    argv.insert(argv.end(), flags.begin(), flags.end());
    web_ = start_command(argv);
    ASSERT_NE(web_, nullptr);
    for (int i = 0; i < 500 && web_->out_so_far().find("serving") == std::string::npos; ++i) ::usleep(20000);
    ASSERT_THAT(web_->out_so_far(), HasSubstr("serving")) << web_->err_so_far();
  }
  httplib::Client client() const {
    httplib::Client c("127.0.0.1", port_);
    c.set_read_timeout(10, 0);
    return c;
  }
  httplib::Headers bearer() const { return {{"Authorization", std::string("Bearer ") + kToken}}; }

  // GET `path` with the token: its JSON (status checked).
  json get(const std::string& path, int status = 200) {
    auto res = client().Get(path, bearer());
    EXPECT_TRUE(res) << path;
    if (!res) return nullptr;
    EXPECT_EQ(res->status, status) << path << ": " << res->body;
    return json::parse(res->body, nullptr, false);
  }
  json post(const std::string& path, const std::string& body, int status = 200) {
    auto res = client().Post(path, bearer(), body, "application/json");
    EXPECT_TRUE(res) << path;
    if (!res) return nullptr;
    EXPECT_EQ(res->status, status) << path << ": " << res->body;
    return json::parse(res->body, nullptr, false);
  }
  // Polls `path` until `ready` holds (at most 20 s); the last body.
  json get_until(const std::string& path, const std::function<bool(const json&)>& ready) {
    json body;
    for (int i = 0; i < 1000; ++i) {
      auto res = client().Get(path, bearer());
      if (res && res->status == 200) {
        body = json::parse(res->body, nullptr, false);
        if (ready(body)) break;
      }
      ::usleep(20000);
    }
    return body;
  }

  // The tests that run on every store (web_test.cpp: SQLite, web_pg_test.cpp:
  // PostgreSQL).
  void api_against_a_database_another_process_works() {
    std::vector<std::string> good, bad;
    for (int i = 0; i < 5; ++i) good.push_back(enqueue("rate_movie", "Film " + std::to_string(i)));
    for (int i = 0; i < 3; ++i) bad.push_back(enqueue("rate_on_sify", "Sifted " + std::to_string(i)));
    const std::string later = enqueue("rate_movie", "Tomorrow", {"--in", "1h"});
    start_web({"--token-env", "RATCHET_WEB_TEST_TOKEN"});
    auto run = start_command({tool_path("ratchet"), "run", "-c", config_, "--progress", "never"});
    ASSERT_NE(run, nullptr);

    // The worker's progress, seen through the dashboard's database reads.
    json overview = get_until("/api/v1/overview", [](const json& o) {
      return o["counts"]["completed"] == 5 && o["counts"]["dead"] == 3;
    });
    ASSERT_EQ(overview["counts"]["completed"], 5) << overview.dump();
    EXPECT_EQ(overview["counts"]["dead"], 3);
    EXPECT_EQ(overview["counts"]["scheduled"], 1);
    ASSERT_EQ(overview["minutes"].size(), 61u) << "the last hour's minutes and the current one";
    std::int64_t completed = 0, dead = 0, failed = 0;
    for (const auto& m : overview["minutes"]) {
      completed += m["completed"].get<std::int64_t>();
      dead += m["dead"].get<std::int64_t>();
      failed += m["failed"].get<std::int64_t>();
    }
    EXPECT_EQ(completed, 5);
    EXPECT_EQ(dead, 3);
    EXPECT_GE(failed, 3) << "every dead job's last attempt failed";

    // Filters, newest first, and paging.
    json dead_page = get("/api/v1/jobs?state=dead");
    EXPECT_EQ(states_of(dead_page), std::set<std::string>{"dead"});
    ASSERT_EQ(dead_page["jobs"].size(), 3u);
    EXPECT_EQ(dead_page["jobs"][0]["id"].get<std::int64_t>(), std::stoll(bad.back())) << "newest first";
    EXPECT_TRUE(dead_page["next_before"].is_null());
    json by_text = get("/api/v1/jobs?q=sIfTeD%201");
    ASSERT_EQ(by_text["jobs"].size(), 1u) << by_text.dump();
    EXPECT_EQ(by_text["jobs"][0]["args"]["name"], "Sifted 1");
    json by_error = get("/api/v1/jobs?q=http%205&type=rate_on_sify");
    EXPECT_EQ(by_error["jobs"].size(), 3u) << "text is looked for in the last error too: " << by_error.dump();
    json one = get("/api/v1/jobs?id=" + good[2]);
    ASSERT_EQ(one["jobs"].size(), 1u);
    EXPECT_EQ(one["jobs"][0]["args"]["name"], "Film 2");
    std::vector<std::int64_t> seen;
    std::string path = "/api/v1/jobs?type=rate_movie&limit=2";
    for (int pages = 0; pages < 10; ++pages) {
      json page = get(path);
      for (const auto& j : page["jobs"]) seen.push_back(j["id"]);
      if (page["next_before"].is_null()) break;
      path = "/api/v1/jobs?type=rate_movie&limit=2&before=" +
             std::to_string(page["next_before"].get<std::int64_t>());
    }
    ASSERT_EQ(seen.size(), 6u) << "five completed and the scheduled one, each once";
    EXPECT_TRUE(std::is_sorted(seen.rbegin(), seen.rend()));
    EXPECT_EQ(get("/api/v1/jobs?state=finished", 400)["error"].get<std::string>(),
              "state \"finished\" is not one of scheduled, available, running, retryable, completed, dead, "
              "cancelled");
    EXPECT_THAT(get("/api/v1/jobs?sate=dead", 400)["error"].get<std::string>(),
                HasSubstr("unknown parameter \"sate\""));
    get("/api/v1/jobs?limit=501", 400);

    // One job, with its steps and attempt errors.
    json job = get("/api/v1/jobs/" + good[0]);
    ASSERT_EQ(job["steps"].size(), 1u);
    EXPECT_EQ(job["steps"][0]["name"], "imdb");
    EXPECT_EQ(job["steps"][0]["state"], "completed");
    json died = get("/api/v1/jobs/" + bad[0]);
    EXPECT_FALSE(died["errors"].empty());
    get("/api/v1/jobs/999999", 404);
    get("/api/v1/jobs/abc", 404);

    // Actions: a finished job cannot be cancelled; a pending one is.
    EXPECT_THAT(post("/api/v1/jobs/" + good[0] + "/cancel", "", 409)["error"].get<std::string>(),
                HasSubstr("already ended"));
    EXPECT_EQ(post("/api/v1/jobs/" + later + "/cancel", "")["job"]["state"], "cancelled");
    EXPECT_EQ(post("/api/v1/jobs/" + good[0] + "/retry", "", 409).count("error"), 1u)
        << "a completed job is not retried";

    // Every dead job matching a filter, retried; the worker runs them again
    // and, with sify still failing, they die again.
    json retried = post("/api/v1/jobs/retry", R"({"state": "dead", "q": "sifted 2"})");
    EXPECT_EQ(retried["retried"], 1);
    EXPECT_EQ(retried["ids"], json::array({std::stoll(bad[2])}));
    post("/api/v1/jobs/retry", R"({"state": "completed"})", 400);
    post("/api/v1/jobs/retry", R"([1, 2])", 400);
    json again = get_until("/api/v1/jobs/" + bad[2],
                           [](const json& j) { return j["state"] == "dead" && j["errors"].size() == 2; });
    EXPECT_EQ(again["errors"].size(), 2u) << "it ran again: " << again.dump();

    // Purging: an age is required and must parse.
    post("/api/v1/jobs/purge", R"({"older_than": "soon"})", 400);
    post("/api/v1/jobs/purge", "{}", 400);
    json purged = post("/api/v1/jobs/purge", R"({"older_than": "1h"})");
    EXPECT_EQ(purged["purged"], 0) << "nothing finished an hour ago";

    ::kill(run->pid(), SIGTERM);
    auto ran = run->wait();
    EXPECT_EQ(ran.exit_code, 1) << "jobs died during the run";
  }

  void reports_of_the_running_engine() {
    // imdb admits one call an hour: of two films rated at once, one parks.
    std::ofstream(config_, std::ios::app) << "\n[[plugin.imdb.limit]]\nrate = 1\nper = \"1h\"\n";
    enqueue("rate_movie", "Heat");
    enqueue("rate_movie", "Alien");
    start_web({"--token-env", "RATCHET_WEB_TEST_TOKEN"});
    EXPECT_TRUE(get("/api/v1/plugins")["loaded"].empty()) << "ratchet web loads no plugin code";
    auto run = start_command({tool_path("ratchet"), "run", "-c", config_, "--progress", "never"});
    ASSERT_NE(run, nullptr);

    json overview = get_until("/api/v1/overview", [](const json& o) {
      for (const auto& p : o["plugins"]) {
        if (p["plugin"] == "imdb" && p["parked_now"] == 1) return o["counts"]["completed"] == 1;
      }
      return false;
    });
    ASSERT_EQ(overview["counts"]["completed"], 1)
        << overview.dump() << "\nratchet run said: " << run->err_so_far();
    bool imdb_throttled = false;
    for (const auto& l : overview["throttled"]) imdb_throttled |= l["plugin"] == "imdb";
    EXPECT_TRUE(imdb_throttled) << "its next free slot is an hour away: " << overview.dump();
    ASSERT_EQ(overview["engines"].size(), 1u) << overview.dump();
    EXPECT_EQ(overview["engines"][0]["running"], true) << overview.dump();

    json plugins = get("/api/v1/plugins");
    std::set<std::string> names;
    for (const auto& p : plugins["loaded"]) names.insert(p["name"].get<std::string>());
    EXPECT_TRUE(names.contains("imdb")) << plugins.dump();
    EXPECT_FALSE(plugins["reported_by"].is_null());

    auto metrics = client().Get("/metrics");
    ASSERT_TRUE(metrics);
    EXPECT_THAT(metrics->body, HasSubstr("ratchet_plugin_parked_steps{plugin=\"imdb\"} 1"));

    ::kill(run->pid(), SIGTERM);
    const auto stopped = run->wait();
    EXPECT_EQ(stopped.exit_code, 0) << stopped.err;
    json after = get("/api/v1/overview");
    ASSERT_EQ(after["engines"].size(), 1u) << after.dump();
    EXPECT_EQ(after["engines"][0]["running"], false)
        << "a stopped engine says so as it stops: " << after.dump();
    EXPECT_TRUE(after["plugins"].empty()) << "nothing is parked in a stopped engine: " << after.dump();
  }

  fs::path dir_;
  std::string config_;
  std::unique_ptr<mock_portal::MockPortalServer> portals_;
  std::unique_ptr<Started> web_;
  int port_ = 0;
};

}  // namespace web_fixture
}  // namespace ratchet::cli_test

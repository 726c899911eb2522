// `ratchet web` on a SQLite file (web_fixture.hpp).
#include "faketime_objects.hpp"
#include "web_fixture.hpp"

namespace ratchet::cli_test {
namespace {

using namespace web_fixture;

TEST_F(RatchetWebTest, WithoutACredential_EveryPathButLoginIsRefused_AndMetricsOnLoopbackIsOpen) {
  enqueue("rate_movie", "Heat");
  start_web({"--token-env", "RATCHET_WEB_TEST_TOKEN"});
  auto c = client();
  for (const std::string path : {"/api/v1/jobs", "/api/v1/overview", "/api/v1/session", "/api/v1/nothing"}) {
    auto res = c.Get(path);
    ASSERT_TRUE(res) << path;
    EXPECT_EQ(res->status, 401) << path;
    EXPECT_THAT(res->body, HasSubstr("\"error\"")) << path;
  }
  auto page = c.Get("/");
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 401);
  EXPECT_THAT(page->body, HasSubstr("login link"));
  auto wrong = c.Get("/api/v1/jobs", {{"Authorization", "Bearer web-test-token-0123456789abcdeX"}});
  ASSERT_TRUE(wrong);
  EXPECT_EQ(wrong->status, 401) << "a token that differs in its last character";
  auto retry = c.Post("/api/v1/jobs/1/retry", "", "application/json");
  ASSERT_TRUE(retry);
  EXPECT_EQ(retry->status, 401);

  auto metrics = c.Get("/metrics");
  ASSERT_TRUE(metrics);
  EXPECT_EQ(metrics->status, 200) << "a loopback server serves /metrics to any local scraper";
  EXPECT_THAT(metrics->body, HasSubstr("ratchet_jobs{state=\"available\"}"));
}

// A page of another site whose name it made resolve to 127.0.0.1 (DNS
// rebinding) is same-origin with the dashboard in the browser: /metrics,
// open to local scrapers, was open to it too. Its requests name its host,
// and a dashboard on loopback answers none of them.
TEST_F(RatchetWebTest, OnLoopback_ARequestAddressedToAnotherHost_IsRefused) {
  start_web({"--token-env", "RATCHET_WEB_TEST_TOKEN"});
  const std::string port = std::to_string(port_);
  auto ask = [&](const std::string& path, const std::string& host) {
    return raw_exchange(port_, "GET " + path + " HTTP/1.1\r\nHost: " + host + "\r\nAuthorization: Bearer " +
                                   kToken + "\r\nConnection: close\r\n\r\n");
  };
  for (const std::string path : {"/metrics", "/api/v1/overview", "/"}) {
    EXPECT_THAT(ask(path, "evil.example:" + port), ::testing::StartsWith("HTTP/1.1 403")) << path;
    EXPECT_THAT(ask(path, "localhost:" + port), ::testing::StartsWith("HTTP/1.1 200")) << path;
  }
}

TEST_F(RatchetWebTest, LoginLink_WorksOnce_AndItsSessionNeedsTheCsrfTokenForActions) {
  const std::string id = enqueue("rate_movie", "Heat", {"--in", "1h"});
  start_web({});
  const std::string printed = web_->out_so_far();
  std::smatch m;
  ASSERT_TRUE(std::regex_search(printed, m, std::regex("/login\\?code=([0-9a-f]{64})"))) << printed;
  const std::string link = m[0];

  auto c = client();
  auto login = c.Get(link);
  ASSERT_TRUE(login);
  EXPECT_EQ(login->status, 303);
  EXPECT_EQ(login->get_header_value("Location"), "/");
  const std::string set_cookie = login->get_header_value("Set-Cookie");
  EXPECT_THAT(set_cookie, HasSubstr("HttpOnly"));
  EXPECT_THAT(set_cookie, HasSubstr("SameSite=Strict"));
  const std::string cookie = set_cookie.substr(0, set_cookie.find(';'));

  auto again = c.Get(link);
  ASSERT_TRUE(again);
  EXPECT_EQ(again->status, 401) << "a login code works once";

  httplib::Headers with_cookie = {{"Cookie", cookie}};
  auto session = c.Get("/api/v1/session", with_cookie);
  ASSERT_TRUE(session);
  ASSERT_EQ(session->status, 200);
  const std::string csrf = json::parse(session->body)["csrf"];
  ASSERT_EQ(csrf.size(), 64u);
  auto page = c.Get("/", with_cookie);
  ASSERT_TRUE(page);
  EXPECT_EQ(page->status, 200);
  EXPECT_THAT(page->get_header_value("Content-Type"), HasSubstr("text/html"));

  const std::string cancel = "/api/v1/jobs/" + id + "/cancel";
  auto no_csrf = c.Post(cancel, with_cookie, "", "application/json");
  ASSERT_TRUE(no_csrf);
  EXPECT_EQ(no_csrf->status, 403) << "a cookie alone does not make an action";
  auto foreign =
      c.Post(cancel, {{"Cookie", cookie}, {"X-Ratchet-CSRF", csrf}, {"Origin", "http://evil.example"}}, "",
             "application/json");
  ASSERT_TRUE(foreign);
  EXPECT_EQ(foreign->status, 403) << "another site's page is refused";
  EXPECT_EQ(get("/api/v1/jobs/" + id, 401).value("error", "").empty(), false) << "no token configured";

  auto ok = c.Post(cancel, {{"Cookie", cookie}, {"X-Ratchet-CSRF", csrf}}, "", "application/json");
  ASSERT_TRUE(ok);
  ASSERT_EQ(ok->status, 200) << ok->body;
  auto body = json::parse(ok->body);
  EXPECT_EQ(body["job"]["state"], "cancelled");
  EXPECT_THAT(body["changed"].get<std::string>(), HasSubstr("cancelled"));
}

TEST_F(RatchetWebTest, ListeningBeyondLoopback_MetricsNeedTheTokenAndAWarningIsPrinted) {
  start_web({"--token-env", "RATCHET_WEB_TEST_TOKEN"}, "0.0.0.0");
  auto open = client().Get("/metrics");
  ASSERT_TRUE(open);
  EXPECT_EQ(open->status, 401) << "a server other machines may reach keeps /metrics closed";
  auto with_token = client().Get("/metrics", bearer());
  ASSERT_TRUE(with_token);
  EXPECT_EQ(with_token->status, 200);
  EXPECT_THAT(web_->err_so_far(), HasSubstr("TLS proxy"));
}

TEST_F(RatchetWebTest, RunWeb_ServesTheDashboardBesideTheWorkers) {
  enqueue("rate_movie", "Heat");
  port_ = free_port();
  web_ = start_command({tool_path("ratchet"), "run", "-c", config_, "--progress", "never", "--web",
                        "127.0.0.1:" + std::to_string(port_), "--web-token-env", "RATCHET_WEB_TEST_TOKEN"});
  ASSERT_NE(web_, nullptr);
  json overview = get_until("/api/v1/overview", [](const json& o) { return o["counts"]["completed"] == 1; });
  EXPECT_EQ(overview["counts"]["completed"], 1) << web_->err_so_far();
  json plugins = get("/api/v1/plugins");
  EXPECT_FALSE(plugins["loaded"].empty()) << "the running engine's own plugins";
  EXPECT_TRUE(plugins["reported_by"].is_null());
  ::kill(web_->pid(), SIGTERM);
  EXPECT_EQ(web_->wait().exit_code, 0);
}

// A second dashboard started on the port of one already serving fails at
// once, naming the address: it must not share the port with the first and
// answer half of its requests.
TEST_F(RatchetWebTest, PortAlreadyServed_ASecondDashboardFailsNamingIt) {
  start_web({"--token-env", "RATCHET_WEB_TEST_TOKEN"});
  const std::string address = "127.0.0.1:" + std::to_string(port_);
  // One that binds serves until killed (SIGKILL after 5 s: exit code 137).
  auto second = run_command({tool_path("ratchet"), "web", "-c", config_, "--listen", address, "--token-env",
                             "RATCHET_WEB_TEST_TOKEN"},
                            {}, {}, 5000);
  EXPECT_NE(second.exit_code, 0);
  EXPECT_NE(second.exit_code, 128 + SIGKILL) << "it served on the port in use: " << second.out;
  EXPECT_THAT(second.err, HasSubstr("cannot listen on " + address));
  EXPECT_EQ(get("/api/v1/session")["read_only"], false) << "the first one still serves";
}

TEST_F(RatchetWebTest, WebSectionOfTheConfig_GivesTheTokenAndReadOnly) {
  std::ofstream(config_, std::ios::app)
      << "\n[web]\ntoken = \"${RATCHET_WEB_TEST_TOKEN}\"\nread_only = true\n";
  const std::string id = enqueue("rate_movie", "Heat", {"--in", "1h"});
  start_web({});
  EXPECT_THAT(web_->out_so_far(), Not(HasSubstr("login?code="))) << "a token is configured";
  EXPECT_THAT(web_->out_so_far(), Not(HasSubstr(kToken)));
  EXPECT_EQ(get("/api/v1/session")["read_only"], true);
  post("/api/v1/jobs/" + id + "/cancel", "", 403);
}

TEST_F(RatchetWebTest, Api_AgainstADatabaseAnotherProcessWorks_ShowsFiltersPagesAndActs) {
  api_against_a_database_another_process_works();
}

TEST_F(RatchetWebTest, WhatOnlyTheRunningEngineKnows_IsShownFromItsReport) {
  reports_of_the_running_engine();
}

// The engines write their reports on the timeline the database holds for
// this boot (ratchet/clock.hpp). A wall clock that stepped since, here one
// minute ahead in the dashboard's process only (libfaketime), must not make
// a running engine look gone, nor drop what it reported.
TEST_F(RatchetWebTest, WallClockSteppedAheadOfTheDatabasesTimeline_ARunningEngineIsStillShownRunning) {
  const fs::path lib = "/usr/lib/x86_64-linux-gnu/faketime/libfaketimeMT.so.1";
  if (!fs::exists(lib)) GTEST_SKIP() << lib << " missing (tools/deps.sh installs faketime)";
  enqueue("rate_movie", "Heat");  // lays the timeline down on the true clock
  auto run = start_command({tool_path("ratchet"), "run", "-c", config_, "--progress", "never"});
  ASSERT_NE(run, nullptr);
  const std::string asan = std::getenv("ASAN_OPTIONS") != nullptr ? std::getenv("ASAN_OPTIONS") : "";
  ::setenv("LD_PRELOAD", lib.c_str(), 1);
  ::setenv("FAKETIME", "+60s", 1);
  ::setenv("FAKETIME_DONT_FAKE_MONOTONIC", "1", 1);
  // libfaketime is loaded ahead of the ASan runtime, which is then told not
  // to insist on coming first.
  ::setenv("ASAN_OPTIONS",
           (asan.empty() ? std::string() : asan + ":").append("verify_asan_link_order=0").c_str(), 1);
  start_web({"--token-env", "RATCHET_WEB_TEST_TOKEN"});
  ASSERT_NE(web_, nullptr);
  const int faked = web_->pid();
  for (const char* name : {"LD_PRELOAD", "FAKETIME", "FAKETIME_DONT_FAKE_MONOTONIC"}) ::unsetenv(name);
  if (asan.empty()) {
    ::unsetenv("ASAN_OPTIONS");
  } else {
    ::setenv("ASAN_OPTIONS", asan.c_str(), 1);
  }
  json overview = get_until("/api/v1/overview", [](const json& o) {
    return o["counts"]["completed"] == 1 && !o["engines"].empty() && !o["plugins"].empty();
  });
  ASSERT_EQ(overview["engines"].size(), 1u) << overview.dump();
  EXPECT_EQ(overview["engines"][0]["running"], true)
      << "its report is seconds old on the database's timeline";
  EXPECT_FALSE(overview["plugins"].empty()) << "what it reported is shown: " << overview.dump();
  ::kill(run->pid(), SIGTERM);
  const auto stopped = run->wait();
  EXPECT_EQ(stopped.exit_code, 0) << stopped.err;
  web_.reset();
  ratchet::testing::remove_faketime_objects(faked);
}

TEST_F(RatchetWebTest, PluginFileNamedInBytesThatAreNotUtf8_NeitherEndsTheEngineNorBreaksTheApi) {
  // A plugin folder of our own: the two plugins the jobs call, and a file
  // whose name is not UTF-8 and whose content is no plugin.
  const fs::path folder = dir_ / "plugins";
  fs::create_directories(folder);
  for (const char* p : {"imdb.so", "sify.so"}) fs::copy_file(fs::path(RATCHET_PLUGIN_DIR) / p, folder / p);
  std::ofstream(folder / "bad\xff\xfe.so") << "not a shared library";
  std::string text;
  {
    std::ifstream in(config_);
    text.assign(std::istreambuf_iterator<char>(in), {});
  }
  const std::string from = std::string("plugins = \"") + RATCHET_PLUGIN_DIR + "\"";
  ASSERT_NE(text.find(from), std::string::npos);
  text.replace(text.find(from), from.size(), "plugins = \"" + folder.string() + "\"");
  std::ofstream(config_) << text;
  enqueue("rate_movie", "Heat");
  start_web({"--token-env", "RATCHET_WEB_TEST_TOKEN"});
  auto run = start_command({tool_path("ratchet"), "run", "-c", config_, "--progress", "never"});
  ASSERT_NE(run, nullptr);
  json overview = get_until("/api/v1/overview", [](const json& o) {
    return o["counts"]["completed"] == 1 && !o["engines"].empty();
  });
  EXPECT_EQ(overview["counts"]["completed"], 1) << run->err_so_far();
  json plugins = get_until("/api/v1/plugins", [](const json& p) { return !p["failed"].empty(); });
  ASSERT_EQ(plugins["failed"].size(), 1u) << plugins.dump();
  EXPECT_THAT(plugins["failed"][0]["file"].get<std::string>(), HasSubstr("bad\xef\xbf\xbd"))
      << "the bytes are shown as U+FFFD";
  ::kill(run->pid(), SIGTERM);
  auto o = run->wait();
  EXPECT_EQ(o.exit_code, 0) << "the engine ran on and stopped cleanly: " << o.err;
}

TEST_F(RatchetWebTest, ReadOnly_RefusesEveryActionAndSaysSo) {
  const std::string id = enqueue("rate_movie", "Heat", {"--in", "1h"});
  start_web({"--token-env", "RATCHET_WEB_TEST_TOKEN", "--read-only"});
  EXPECT_THAT(post("/api/v1/jobs/" + id + "/cancel", "", 403)["error"].get<std::string>(),
              HasSubstr("read-only"));
  post("/api/v1/jobs/purge", R"({"older_than": "1s"})", 403);
  EXPECT_EQ(get("/api/v1/jobs/" + id)["state"], "scheduled") << "nothing changed";
  EXPECT_EQ(get("/api/v1/session")["read_only"], true);
}

TEST_F(RatchetWebTest, HostileRequests_AreRefusedWithoutHarm) {
  start_web({"--token-env", "RATCHET_WEB_TEST_TOKEN"});
  EXPECT_THAT(
      raw_exchange(
          port_,
          std::string("POST /api/v1/jobs/purge HTTP/1.1\r\nHost: 127.0.0.1\r\nAuthorization: Bearer ") +
              kToken + "\r\nContent-Length: 70000\r\n\r\n"),
      ::testing::StartsWith("HTTP/1.1 413"))
      << "a body over 64 KiB is refused before it is read";
  post("/api/v1/jobs/purge", "{\"older_than\": ", 400);
  post("/api/v1/jobs/retry", R"({"state": {"$ne": 1}})", 400);
  get("/api/v1/jobs?id=1%20OR%201=1", 400);
  get("/api/v1/jobs?q=%27%3B%20DROP%20TABLE%20jobs%3B--");
  auto res = client().Get("/../../etc/passwd", bearer());
  ASSERT_TRUE(res);
  EXPECT_EQ(res->status, 404);
  EXPECT_EQ(get("/api/v1/overview")["counts"].size(), 7u) << "the database is intact";
}

// The API answered the server's own refusals as text (411, 413, 414)
// while everything else it says is JSON; and a form-encoded body over
// 8 KiB got a 413 that named the 64 KiB limit.
TEST_F(RatchetWebTest, ApiRefusalsBeforeRouting_AreJsonErrorsThatNameTheLimit) {
  start_web({"--token-env", "RATCHET_WEB_TEST_TOKEN"});
  const std::string auth = std::string("Host: 127.0.0.1\r\nAuthorization: Bearer ") + kToken + "\r\n";
  auto error_of = [&](const std::string& request, const std::string& status) {
    const std::string reply = raw_exchange(port_, request);
    EXPECT_THAT(reply, ::testing::StartsWith("HTTP/1.1 " + status)) << reply;
    EXPECT_THAT(reply, HasSubstr("Content-Type: application/json")) << reply;
    const auto body = reply.find("\r\n\r\n");
    if (body == std::string::npos) return std::string();
    const json parsed = json::parse(reply.substr(body + 4), nullptr, false);
    EXPECT_TRUE(parsed.is_object() && parsed.contains("error")) << reply;
    return parsed.is_object() ? parsed.value("error", std::string()) : std::string();
  };
  EXPECT_THAT(
      error_of("POST /api/v1/jobs/purge HTTP/1.1\r\n" + auth + "Content-Length: 70000\r\n\r\n", "413"),
      HasSubstr("65536"));
  EXPECT_THAT(error_of("POST /api/v1/jobs/purge HTTP/1.1\r\n" + auth +
                           "Content-Type: application/x-www-form-urlencoded\r\nContent-Length: 9000\r\n\r\n",
                       "413"),
              HasSubstr("form-encoded"));
  EXPECT_THAT(error_of("POST /api/v1/jobs/purge HTTP/1.1\r\n" + auth + "Connection: close\r\n\r\n", "411"),
              HasSubstr("Content-Length"));
  EXPECT_THAT(
      error_of("POST /api/v1/jobs/purge HTTP/1.1\r\n" + auth + "Transfer-Encoding: chunked\r\n\r\n0\r\n\r\n",
               "413"),
      HasSubstr("chunked"));
  EXPECT_THAT(error_of("GET /api/v1/jobs?q=" + std::string(9000, 'a') + " HTTP/1.1\r\n" + auth +
                           "Connection: close\r\n\r\n",
                       "414"),
              HasSubstr("too long"));
}

// A misspelt filter key was dropped, so {"state": "dead", "typ": "x"}
// retried every dead job; a job already available was "available again"
// with nothing changed.
TEST_F(RatchetWebTest, RetryActions_AnUnknownKeyOrAJobNotDeadIsRefusedChangingNothing) {
  const std::string id = enqueue("rate_movie", "Heat");
  start_web({"--token-env", "RATCHET_WEB_TEST_TOKEN"});
  for (const char* body :
       {R"({"state": "available", "typ": "no_such_type"})", R"({"limit": "1"})", R"({"before": "9"})"}) {
    EXPECT_THAT(post("/api/v1/jobs/retry", body, 400)["error"].get<std::string>(), HasSubstr("unknown key"))
        << body;
  }
  EXPECT_THAT(post("/api/v1/jobs/" + id + "/retry", "", 409)["error"].get<std::string>(),
              HasSubstr("only dead or cancelled jobs can be retried"));
  EXPECT_EQ(get("/api/v1/jobs/" + id)["state"], "available");
}

TEST_F(RatchetWebTest, TokenEnvironmentVariable_UnsetOrShort_ExitsTwoNamingIt) {
  auto unset =
      run_command({tool_path("ratchet"), "web", "-c", config_, "--token-env", "RATCHET_WEB_NO_SUCH_VAR"});
  EXPECT_EQ(unset.exit_code, 2);
  EXPECT_THAT(unset.err, HasSubstr("RATCHET_WEB_NO_SUCH_VAR"));
  auto shorter = run_command({tool_path("ratchet"), "web", "-c", config_, "--token-env", "SHORT_TOKEN"}, {},
                             {"SHORT_TOKEN=abc"});
  EXPECT_EQ(shorter.exit_code, 2);
  EXPECT_THAT(shorter.err, HasSubstr("shorter than 16"));
  EXPECT_THAT(shorter.err + shorter.out, Not(HasSubstr("abc\n")));
}

TEST_F(RatchetWebTest, SecretsAndRedactedArguments_NeverAppearInAnyAnswer) {
  // The file's last table is [job.rate_on_sify].
  std::ofstream(config_, std::ios::app) << "redact = [\"name\"]\n";
  enqueue("rate_movie", "Heat");
  const std::string hidden = enqueue("rate_on_sify", "Jane Doe");
  start_web({"--token-env", "RATCHET_WEB_TEST_TOKEN"});
  auto run = start_command({tool_path("ratchet"), "run", "-c", config_, "--progress", "never"});
  ASSERT_NE(run, nullptr);
  get_until("/api/v1/overview",
            [](const json& o) { return o["counts"]["completed"] == 1 && o["counts"]["dead"] == 1; });
  EXPECT_EQ(get("/api/v1/jobs/" + hidden)["args"]["name"], "[redacted]");
  EXPECT_EQ(get("/api/v1/jobs/1")["args"]["name"], "Heat") << "other job types show their arguments";
  // A search matches what is shown: a redacted value, found by searching
  // for it, was spelled out a letter at a time.
  EXPECT_TRUE(get("/api/v1/jobs?q=jane%20doe")["jobs"].empty());
  EXPECT_TRUE(get("/api/v1/jobs?q=e%20d")["jobs"].empty());
  EXPECT_EQ(get("/api/v1/jobs?q=heat")["jobs"].size(), 1u);
  auto shown = run_command({tool_path("ratchet"), "jobs", "show", hidden, "-c", config_});
  EXPECT_THAT(shown.out, HasSubstr("[redacted]"));
  EXPECT_THAT(shown.out, Not(HasSubstr("Jane Doe")));
  std::string everything;
  for (const std::string& path : std::vector<std::string>{
           "/api/v1/session", "/api/v1/overview", "/api/v1/jobs", "/api/v1/jobs/1", "/api/v1/jobs/" + hidden,
           "/api/v1/plugins", "/api/v1/limits", "/metrics", "/", "/app.js"}) {
    auto res = client().Get(path, bearer());
    ASSERT_TRUE(res) << path;
    everything += res->body;
  }
  EXPECT_THAT(everything, Not(HasSubstr(kSecret)));
  EXPECT_THAT(everything, Not(HasSubstr(kToken)));
  EXPECT_THAT(everything, Not(HasSubstr("Jane Doe")));
  // Nor where a server's error echoed it, in the URL that failed.
  EXPECT_THAT(everything, Not(HasSubstr("Jane%20Doe")));
  EXPECT_THAT(shown.out, Not(HasSubstr("Jane%20Doe")));
  EXPECT_TRUE(get("/api/v1/jobs?q=jane%2520doe")["jobs"].empty())
      << "nor found by searching the error for it";
  ::kill(run->pid(), SIGTERM);
  run->wait();
  ::kill(web_->pid(), SIGTERM);
  auto o = web_->wait();
  EXPECT_EQ(o.exit_code, 0) << o.err;
  EXPECT_THAT(o.out + o.err, Not(HasSubstr(kToken)));
  EXPECT_THAT(o.out + o.err, Not(HasSubstr(kSecret)));
}

}  // namespace
}  // namespace ratchet::cli_test

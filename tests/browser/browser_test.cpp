// The dashboard as an operator sees it: the browser suite (dashboard.test.mjs,
// run by run.sh in headless Chromium) against `ratchet web`, over a database
// that `ratchet run` works meanwhile, with portals from the mock portal
// server in this process. The harness makes what the suite needs: completed
// jobs, dead jobs of type rate_movie, a pending job to cancel, and steps
// parked behind a throttled plugin (amazon_prime, one call an hour) that a
// command adds to while the page is open. Screenshots of each page go to
// <build>/dashboard-screenshots.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <httplib.h>
#include <signal.h>
#include <stdlib.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>

#include <nlohmann/json.hpp>

#include "command_runner.hpp"
#include "mock_portal/server.hpp"
#include "ratchet_test_paths.hpp"

namespace ratchet::cli_test {
namespace {

namespace fs = std::filesystem;
using json = nlohmann::json;

constexpr const char* kToken = "browser-test-token-0123456789abcdef";

TEST(DashboardInABrowser, EveryPageShowsTheApiFiltersActsAndFollowsParkedSteps) {
  const fs::path dir = fs::temp_directory_path() / ("ratchet-browser-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  mock_portal::ServerOptions options;
  mock_portal::PortalOptions broken;
  broken.error_rate = 1.0;  // every sify call answers 5xx: rate_movie jobs die
  options.portals["sify"] = broken;
  auto portals = mock_portal::MockPortalServer::start(options);
  ASSERT_TRUE(portals.has_value()) << portals.error().to_string();
  const std::string config = (dir / "ratchet.toml").string();
  {
    std::ofstream out(config);
    out << "[engine]\ndatabase = \"jobs.db\"\nplugins = \"" << RATCHET_PLUGIN_DIR
        << "\"\nworkers = 4\npoll_interval = \"20ms\"\npark_threshold = \"20ms\"\n\n";
    for (const std::string p : {"imdb", "sify", "amazon_prime"}) {
      out << "[plugin." << p << "]\nbase_url = \"" << (*portals)->portal_url(p) << "\"\n";
      out << "[plugin." << p << ".retry]\nattempts = 1\n\n";
    }
    out << "[[plugin.amazon_prime.limit]]\nrate = 1\nper = \"1h\"\n\n";
    for (const auto& [type, call] :
         {std::pair{"rate_movie", "sify.get_rating"}, std::pair{"rate_on_imdb", "imdb.get_rating"},
          std::pair{"rate_on_amazon", "amazon_prime.get_rating"}}) {
      out << "[job." << type << "]\nattempts = 1\nsteps = [\n  { name = \"rate\", call = \"" << call
          << "\", args = { name = \"{{args.name}}\" } },\n]\n\n";
    }
  }
  const std::string bin = tool_path("ratchet");
  auto enqueue = [&](const std::string& type, const std::string& name, std::vector<std::string> extra = {}) {
    std::vector<std::string> argv = {bin, "enqueue", "-c", config, type, "--arg", "name=" + name};
    argv.insert(argv.end(), extra.begin(), extra.end());
    auto o = run_command(argv);
    ASSERT_EQ(o.exit_code, 0) << o.err;
  };
  for (const char* name : {"Heat", "Alien", "Brazil", "Ran", "Vertigo"}) enqueue("rate_on_imdb", name);
  for (const char* name : {"Nope 1", "Nope 2", "Nope <b>3</b>"}) enqueue("rate_movie", name);
  for (const char* name : {"Parked 1", "Parked 2", "Parked 3"}) enqueue("rate_on_amazon", name);
  enqueue("rate_on_imdb", "Later", {"--in", "1h"});

  auto run = start_command({bin, "run", "-c", config, "--progress", "never"});
  ASSERT_NE(run, nullptr);
  const int port = free_port();
  ::setenv("RATCHET_BROWSER_TEST_TOKEN", kToken, 1);
  auto web = start_command({bin, "web", "-c", config, "--listen", "127.0.0.1:" + std::to_string(port),
                            "--token-env", "RATCHET_BROWSER_TEST_TOKEN"});
  ASSERT_NE(web, nullptr);

  // Until the worker has done what it can: 5 completed, 3 dead, one of the
  // amazon jobs through and two parked behind the limit.
  httplib::Client client("127.0.0.1", port);
  json overview;
  for (int i = 0; i < 1500; ++i) {
    auto res = client.Get("/api/v1/overview", {{"Authorization", std::string("Bearer ") + kToken}});
    if (res && res->status == 200) {
      overview = json::parse(res->body, nullptr, false);
      std::int64_t parked = 0;
      for (const auto& p : overview.value("plugins", json::array())) {
        if (p["plugin"] == "amazon_prime") parked = p["parked_now"];
      }
      if (overview["counts"]["completed"] == 6 && overview["counts"]["dead"] == 3 && parked == 2) break;
    }
    ::usleep(20000);
  }
  ASSERT_EQ(overview["counts"]["dead"], 3) << overview.dump() << run->err_so_far();

  const fs::path shots = fs::path(RATCHET_BINARY_DIR) / "dashboard-screenshots";
  fs::create_directories(shots);
  auto o = run_command(
      {fs::path(RATCHET_SOURCE_DIR) / "tests/browser/run.sh"}, {},
      {"RATCHET_WEB_URL=http://127.0.0.1:" + std::to_string(port), std::string("RATCHET_WEB_TOKEN=") + kToken,
       "RATCHET_SCREENSHOTS=" + shots.string(), "RATCHET_PARKED_PLUGIN=amazon_prime",
       "RATCHET_ENQUEUE_PARKED=" + bin + " enqueue -c " + config + " rate_on_amazon --arg 'name=Parked 4'"},
      // Room for run.sh's `npm ci` on a machine where tools/test.sh did not run first.
      240000);
  EXPECT_EQ(o.exit_code, 0) << o.out << o.err;
  EXPECT_THAT(o.out, ::testing::HasSubstr("# fail 0"));
  EXPECT_THAT(o.out, ::testing::HasSubstr("# skipped 0")) << "every test ran: " << o.out;
  for (const char* shot : {"overview.png", "jobs.png", "job.png", "plugins.png", "limits.png"}) {
    EXPECT_TRUE(fs::exists(shots / shot)) << shot;
  }

  ::kill(web->pid(), SIGTERM);
  web->wait();
  ::kill(run->pid(), SIGTERM);
  run->wait();
  (*portals)->stop();
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ratchet::cli_test

// A key from the environment, sent by the shipped http_json plugin in a URL
// and a header, to a server that answers 404 and 500 and echoes the key back
// in every encoding: after `ratchet run`, neither the database file, nor the
// log, nor `jobs show` / `jobs list --json` holds any form of it.
#include <gtest/gtest.h>
#include <httplib.h>
#include <unistd.h>

#include <atomic>
#include <chrono>
#include <filesystem>
#include <fstream>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include <nlohmann/json.hpp>

#include "command_runner.hpp"
#include "encodings.hpp"
#include "ratchet_test_paths.hpp"

namespace ratchet::cli_test {
namespace {

namespace fs = std::filesystem;
using namespace std::chrono_literals;

const std::string kKey = "sk_live_4f9Qz7Lm2Xw8Rt5Vb3";

using ratchet::testing::base64;

// Every byte as %XX, in upper- or lower-case hex.
std::string percent_all(const std::string& s, bool lower) {
  const char* hex = lower ? "0123456789abcdef" : "0123456789ABCDEF";
  std::string out;
  for (char c : s) {
    out += '%';
    out += hex[static_cast<unsigned char>(c) >> 4];
    out += hex[static_cast<unsigned char>(c) & 15];
  }
  return out;
}

// Every byte as a JSON \u00XX escape.
std::string json_unicode(const std::string& s) {
  std::string out;
  for (char c : s) out += "\\u00" + percent_all(std::string(1, c), true).substr(1);
  return out;
}

// The forms of the key a leak would take: any eight characters of it (what
// a cut through it leaves) as is, byte by byte percent-encoded or JSON-escaped,
// and the parts of its base64 that stay the same at each of the three
// alignments.
std::vector<std::string> leak_forms() {
  constexpr std::size_t kPart = 8;
  std::vector<std::string> forms;
  for (std::size_t i = 0; i + kPart <= kKey.size(); ++i) {
    const std::string part = kKey.substr(i, kPart);
    for (const auto& form : {part, percent_all(part, false), percent_all(part, true), json_unicode(part)})
      forms.push_back(form);
  }
  for (std::size_t k = 0; k < 3; ++k) {
    const std::string encoded = base64(std::string(k, 'u') + kKey);
    const std::size_t from = (8 * k + 5) / 6;
    const std::size_t to = 8 * (k + kKey.size()) / 6;
    for (std::size_t i = from; i + kPart <= to; ++i) forms.push_back(encoded.substr(i, kPart));
  }
  return forms;
}

void expect_no_key(const std::string& what, const std::string& text) {
  EXPECT_FALSE(text.empty()) << what << " is empty";
  for (const auto& form : leak_forms()) {
    const auto at = text.find(form);
    EXPECT_EQ(at, std::string::npos) << what << " holds \"" << form << "\" at " << at << ": "
                                     << text.substr(at == std::string::npos ? 0 : (at > 80 ? at - 80 : 0),
                                                    200);
  }
}

std::string read_bytes(const fs::path& file) {
  std::ifstream in(file, std::ios::binary);
  std::ostringstream out;
  out << in.rdbuf();
  return out.str();
}

// Answers /movies/missing 404 and /movies/broken 500, each body quoting the
// request's URL and its key as is, percent-encoded, JSON-escaped and in
// Basic auth, with the raw key placed across the 200th byte, where the SDK
// cuts bodies it quotes.
class EchoingServer {
 public:
  EchoingServer() {
    auto answer = [this](const httplib::Request& req, httplib::Response& res, int status) {
      if (req.get_param_value("api_key") == kKey) ++key_in_query_;
      if (req.get_header_value("X-Api-Key") == "Token " + kKey) ++key_in_header_;
      std::string body = "{\"pad\":\"" + std::string(190 - 8, '.') + kKey + "\",";
      body += "\"url\":\"" + req.target + "\",\"pct\":\"" + percent_all(kKey, true) + "\",\"PCT\":\"" +
              percent_all(kKey, false) + "\",\"auth\":\"Basic " + base64("user:" + kKey) + "\",\"auth2\":\"" +
              base64("us:" + kKey) + "\",\"auth3\":\"" + base64("u:" + kKey) + "\",\"json\":\"" +
              json_unicode(kKey) + "\"}";
      res.status = status;
      res.set_header("X-Echo-Key", kKey);
      res.set_content(body, "application/json");
    };
    server_.Get("/movies/missing",
                [answer](const httplib::Request& q, httplib::Response& r) { answer(q, r, 404); });
    server_.Get("/movies/broken",
                [answer](const httplib::Request& q, httplib::Response& r) { answer(q, r, 500); });
    port_ = server_.bind_to_any_port("127.0.0.1");
    thread_ = std::thread([this] { server_.listen_after_bind(); });
    const auto deadline = std::chrono::steady_clock::now() + 5s;
    while (!server_.is_running() && std::chrono::steady_clock::now() < deadline)
      std::this_thread::sleep_for(1ms);
  }
  ~EchoingServer() {
    server_.stop();
    if (thread_.joinable()) thread_.join();
  }
  EchoingServer(const EchoingServer&) = delete;
  EchoingServer& operator=(const EchoingServer&) = delete;

  int port() const { return port_; }
  int key_in_query() const { return key_in_query_.load(); }
  int key_in_header() const { return key_in_header_.load(); }

 private:
  httplib::Server server_;
  std::thread thread_;
  int port_ = 0;
  std::atomic<int> key_in_query_{0};
  std::atomic<int> key_in_header_{0};
};

TEST(RatchetSecrets, KeyEchoedByAFailingServer_IsNowhereInTheDatabaseLogOrListings) {
  EchoingServer server;
  ASSERT_GT(server.port(), 0);
  const fs::path dir = fs::temp_directory_path() / ("ratchet-cli-secrets-" + std::to_string(::getpid()));
  fs::remove_all(dir);
  fs::create_directories(dir);
  const std::string config = (dir / "ratchet.toml").string();
  std::ofstream(config)
      << "[engine]\ndatabase = \"jobs.db\"\nplugins = \"" << RATCHET_PLUGIN_DIR
      << "\"\nworkers = 2\npoll_interval = \"20ms\"\npark_threshold = \"20ms\"\n\n"
      << "[plugin.http_json]\nurl = \"http://127.0.0.1:" << server.port()
      << "/movies/{{args.name}}?api_key=${RATCHET_TEST_API_KEY}&lang=en\"\n"
      << "headers = { X-Api-Key = \"Token ${RATCHET_TEST_API_KEY}\" }\n"
      << "[plugin.http_json.retry]\nattempts = 2\ninitial = \"10ms\"\nmax = \"20ms\"\n\n"
      << "[job.lookup]\nattempts = 1\nsteps = [\n"
      << "  { name = \"get\", call = \"http_json.request\", args = { name = \"{{args.name}}\" } },\n"
      << "]\n";
  const std::vector<std::string> env = {"RATCHET_TEST_API_KEY=" + kKey};
  auto ratchet = [&](std::vector<std::string> args) {
    args.insert(args.begin(), tool_path("ratchet"));
    args.push_back("-c");
    args.push_back(config);
    return run_command(args, {}, env);
  };

  std::vector<std::string> ids;
  for (const std::string name : {"missing", "broken"}) {
    auto o = ratchet({"enqueue", "lookup", "--arg", "name=" + name});
    ASSERT_EQ(o.exit_code, 0) << o.err;
    ids.push_back(o.out.substr(0, o.out.find_first_of(" \n")));
  }
  auto run = ratchet({"run", "--until-empty", "--log-level", "trace"});
  EXPECT_EQ(run.exit_code, 1) << "both jobs end dead: " << run.err;
  EXPECT_GE(server.key_in_query(), 3) << "the key reached the server in the URL";
  EXPECT_GE(server.key_in_header(), 3) << "the key reached the server in its header";
  expect_no_key("the log of ratchet run", run.err + run.out);

  auto list = ratchet({"jobs", "list", "--json"});
  ASSERT_EQ(list.exit_code, 0) << list.err;
  expect_no_key("jobs list --json", list.out);
  auto jobs = nlohmann::json::parse(list.out, nullptr, false);
  ASSERT_EQ(jobs.size(), 2u) << list.out;
  for (const auto& job : jobs) {
    EXPECT_EQ(job["state"], "dead") << job.dump();
    EXPECT_NE(job["last_error"].get<std::string>().find("HTTP "), std::string::npos) << job.dump();
  }
  for (const auto& id : ids) {
    for (bool json : {false, true}) {
      std::vector<std::string> args = {"jobs", "show", id};
      if (json) args.push_back("--json");
      auto show = ratchet(args);
      ASSERT_EQ(show.exit_code, 0) << show.err;
      EXPECT_NE(show.out.find("HTTP "), std::string::npos) << "the error is shown: " << show.out;
      expect_no_key("jobs show " + id + (json ? " --json" : ""), show.out);
    }
  }
  std::size_t scanned = 0;
  for (const auto& entry : fs::directory_iterator(dir)) {
    if (entry.path().filename() == "ratchet.toml") continue;
    const std::string bytes = read_bytes(entry.path());
    scanned += bytes.size();
    expect_no_key(entry.path().filename().string(), bytes);
  }
  EXPECT_GT(scanned, 0u) << "the database was written";
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ratchet::cli_test

// ratchet-mock-portal: serves the five mock portals on one loopback port
// until interrupted. Prints the bound URL on its first line of output, e.g.
//   ratchet-mock-portal --port 0 --portal imdb.dialect=fixed_window --portal imdb.limit=5
#include <csignal>
#include <fstream>
#include <iostream>

#include <CLI/CLI.hpp>

#include "mock_portal/server.hpp"

namespace {

int run(int argc, char** argv) {
  using namespace ratchet::mock_portal;
  CLI::App app{"Mock movie portals (imdb, rotten_tomatoes, sify, netflix, amazon_prime) with rate limits"};
  std::string host = "127.0.0.1";
  int port = 0;
  std::string config_file;
  std::vector<std::string> portal_flags;
  std::string port_file;
  std::uint64_t seed = 42;
  app.add_option("--host", host, "loopback address to listen on (127.0.0.1, ::1 or localhost)");
  app.add_option("--port", port, "port to listen on; 0 picks a free one")->check(CLI::Range(0, 65535));
  app.add_option("--config", config_file,
                 "JSON file: {\"seed\", \"threads\", \"portals\": {NAME|\"*\": {...}}}");
  app.add_option("--portal", portal_flags, "NAME.KEY=VALUE, e.g. imdb.dialect=token_bucket (NAME may be *)");
  app.add_option("--seed", seed, "seed deciding which requests get a 5xx");
  app.add_option("--port-file", port_file, "also write the bound port to this file");
  CLI11_PARSE(app, argc, argv);

  ServerOptions options;
  options.host = host;
  options.port = port;
  options.seed = seed;
  if (!config_file.empty()) {
    std::ifstream in(config_file);
    if (!in) {
      std::cerr << "ratchet-mock-portal: cannot read config file '" << config_file << "'\n";
      return 2;
    }
    const auto doc = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
    if (doc.is_discarded()) {
      std::cerr << "ratchet-mock-portal: " << config_file << " is not valid JSON\n";
      return 2;
    }
    if (auto s = apply_json(options, doc); !s) {
      std::cerr << "ratchet-mock-portal: " << config_file << ": " << s.error().message() << "\n";
      return 2;
    }
  }
  for (const auto& flag : portal_flags) {
    const auto dot = flag.find('.');
    const auto eq = flag.find('=');
    if (dot == std::string::npos || eq == std::string::npos || eq < dot) {
      std::cerr << "ratchet-mock-portal: --portal " << flag << ": expected NAME.KEY=VALUE\n";
      return 2;
    }
    nlohmann::json doc = {
        {"portals", {{flag.substr(0, dot), {{flag.substr(dot + 1, eq - dot - 1), flag.substr(eq + 1)}}}}}};
    if (auto s = apply_json(options, doc); !s) {
      std::cerr << "ratchet-mock-portal: --portal " << flag << ": " << s.error().message() << "\n";
      return 2;
    }
  }

  // Block the stop signals before any thread starts so that only sigwait
  // below receives them.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  auto server = MockPortalServer::start(std::move(options));
  if (!server) {
    std::cerr << "ratchet-mock-portal: " << server.error().message() << "\n";
    return 1;
  }
  std::cout << "listening on " << (*server)->base_url() << std::endl;
  if (!port_file.empty()) std::ofstream(port_file) << (*server)->port() << "\n";

  int received = 0;
  sigwait(&signals, &received);
  (*server)->stop();
  return 0;
}

}  // namespace

int main(int argc, char** argv) { return run(argc, argv); }

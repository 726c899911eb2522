// `ratchet web`: serves the dashboard and its JSON API over the database a
// config file names, until SIGINT or SIGTERM. It loads no plugin code
// (EngineUse::kInspect), so it runs beside the processes that work the jobs.
#include <fmt/format.h>
#include <signal.h>

#include <cstdio>
#include <cstdlib>

#include "commands.hpp"
#include "config/load.hpp"
#include "exit_codes.hpp"
#include "web/web_server.hpp"

namespace ratchet::cli {

config::WebSpec web_spec(const std::string& config_file) {
  // Read after the engine opened the same file, so it is valid; a file that
  // changed in between falls back to the defaults.
  auto loaded = config::load_file(config_file);
  return loaded ? (*loaded)->web : config::WebSpec{};
}

int web_token(const std::string& token_env, std::string& token) {
  if (token_env.empty()) return kOk;
  const char* value = std::getenv(token_env.c_str());
  if (value == nullptr || *value == '\0') {
    return usage_error(fmt::format(
        "{0}: the environment variable {0} is not set or empty; set it to the access token (at least 16 "
        "characters), or leave the token out to log in with a one-time link",
        token_env));
  }
  if (std::string_view(value).size() < 16) {
    return usage_error(fmt::format(
        "{}: the token is shorter than 16 characters; use a long random one, e.g. from `openssl rand "
        "-hex 32`",
        token_env));
  }
  token = value;
  return kOk;
}

std::unique_ptr<web::WebServer> start_web(const std::string& address, Engine& engine,
                                          const web::WebOptions& options, const std::string& token_from,
                                          int& exit_code) {
  auto server = web::WebServer::start(address, engine, options);
  if (!server) {
    exit_code = report(server.error());
    return nullptr;
  }
  fmt::print("ratchet web: serving {} on {}\n", engine.database(), (*server)->origin());
  if (options.token.empty()) {
    fmt::print("open this link to log in (it works once): {}\n", (*server)->login_link());
  } else {
    fmt::print("log in with {}/login?token=<the token in {}>, or send Authorization: Bearer\n",
               (*server)->origin(), token_from);
  }
  if (!web::is_loopback(address.substr(0, address.rfind(':')))) {
    fmt::print(
        stderr,
        "ratchet web: listening beyond this machine over plain HTTP; put a TLS proxy in front of it\n");
  }
  std::fflush(stdout);
  exit_code = kOk;
  return std::move(*server);
}

namespace {

struct WebFlags {
  std::string config;
  std::string listen;  // empty: [web] listen
  std::string token_env;
  bool read_only = false;
};

int serve(const WebFlags& f) {
  // The command line over the file's [web] section.
  const config::WebSpec spec = web_spec(f.config);
  web::WebOptions options;
  options.read_only = f.read_only || spec.read_only;
  options.token = spec.token;
  if (int code = web_token(f.token_env, options.token); code != kOk) return code;
  const std::string listen = f.listen.empty() ? spec.listen : f.listen;
  // Blocked before any thread starts, so every thread leaves them to the
  // wait below.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  int code = kOk;
  auto engine = open_cli_engine(f.config, code, EngineUse::kInspect);
  if (!engine) return code;
  auto server =
      start_web(listen, *engine, options, f.token_env.empty() ? "[web] token" : "$" + f.token_env, code);
  if (!server) return code;
  int sig = 0;
  while (sig != SIGINT && sig != SIGTERM) sig = sigwaitinfo(&signals, nullptr);
  server.reset();
  return kOk;
}

}  // namespace

void add_web(CLI::App& app, Action& action) {
  auto f = std::make_shared<WebFlags>();
  auto* cmd = app.add_subcommand(
      "web",
      "Serve the dashboard and its JSON API (docs/web.md) over the config's database until SIGINT/SIGTERM; "
      "loads no plugin, so it runs beside the processes that work the jobs");
  add_config_option(*cmd, f->config);
  cmd->add_option("--listen", f->listen,
                  "HOST:PORT to listen on (default: [web] listen, else 127.0.0.1:8077; port 0: any free)");
  cmd->add_option("--token-env", f->token_env,
                  "Read the access token from this environment variable (Authorization: Bearer, or "
                  "/login?token=); without it, a one-time login link is printed");
  cmd->add_flag("--read-only", f->read_only,
                "Refuse every action (retry, cancel, purge), as [web] read_only = true does");
  cmd->callback([f, &action] { action = [f] { return serve(*f); }; });
}

}  // namespace ratchet::cli

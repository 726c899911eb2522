// `ratchet enqueue TYPE (--arg k=v ... | --json '{...}')`: checks the
// arguments against the job type (the engine refuses before writing) and
// prints the new job's id.
#include <fmt/format.h>

#include <algorithm>
#include <cstdio>

#include <nlohmann/json.hpp>

#include "commands.hpp"
#include "exit_codes.hpp"
#include "text.hpp"

namespace ratchet::cli {

namespace {

struct EnqueueFlags {
  std::string config;
  std::string type;
  std::vector<std::string> args;
  std::string json;
  std::string in;
  std::string at;
  std::optional<int> priority;
  std::optional<int> attempts;
  std::string unique;
  std::string queue;
};

// `text` with every byte outside printable ASCII as \xNN.
std::string shown_bytes(std::string_view text) {
  std::string out;
  for (const unsigned char c : text) {
    if (c >= 0x20 && c < 0x7f && c != '\\') {
      out += static_cast<char>(c);
    } else {
      out += fmt::format("\\x{:02x}", c);
    }
  }
  return out;
}

// name=value gives a string; name:=value gives the JSON value (a number,
// true, an object...).
Result<nlohmann::json> parse_args(const EnqueueFlags& f) {
  if (!f.json.empty()) {
    nlohmann::json j;
    try {
      j = nlohmann::json::parse(f.json);
    } catch (const nlohmann::json::parse_error& e) {
      // Where it went wrong, and the text there shown byte-safe: the raw
      // text may hold bytes a terminal acts on.
      const std::size_t at = std::min<std::size_t>(e.byte > 0 ? e.byte - 1 : 0, f.json.size());
      const std::size_t from = at > 20 ? at - 20 : 0;
      return fail(Error::invalid_argument(
          fmt::format("--json is not valid JSON text: at byte {} (near \"{}\"); write e.g. --json "
                      "'{{\"name\": \"Heat\"}}' "
                      "(JSON has no NaN or Infinity, and its strings are UTF-8)",
                      at + 1, shown_bytes(std::string_view(f.json).substr(from, 40)))));
    }
    if (!j.is_object()) {
      return fail(Error::invalid_argument(fmt::format(
          "--json must be a JSON object, not {}, e.g. --json '{{\"name\": \"Heat\"}}'", j.type_name())));
    }
    return j;
  }
  nlohmann::json out = nlohmann::json::object();
  for (const auto& a : f.args) {
    auto eq = a.find('=');
    if (eq == std::string::npos || eq == 0) {
      return fail(Error::invalid_argument(fmt::format(
          "--arg \"{}\" is not NAME=VALUE (strings) or NAME:=JSON (numbers, booleans, objects)", a)));
    }
    if (a[eq - 1] == ':') {
      std::string name = a.substr(0, eq - 1);
      auto v = nlohmann::json::parse(a.substr(eq + 1), nullptr, false);
      if (v.is_discarded() || name.empty()) {
        return fail(Error::invalid_argument(fmt::format("--arg \"{}\": the value after := is not JSON", a)));
      }
      out[name] = std::move(v);
    } else {
      out[a.substr(0, eq)] = a.substr(eq + 1);
    }
  }
  return out;
}

int enqueue(const EnqueueFlags& f) {
  auto args = parse_args(f);
  if (!args) return report(args.error());
  EnqueueOptions options;
  options.queue = f.queue;
  options.priority = f.priority;
  options.max_attempts = f.attempts;
  options.unique_key = f.unique;
  if (!f.in.empty()) {
    auto d = parse_duration(f.in);
    if (!d) return report(d.error().with_context("--in"));
    options.delay = *d;
  }
  if (!f.at.empty()) {
    auto t = parse_time(f.at);
    if (!t) return report(t.error().with_context("--at"));
    options.run_at = *t;
  }
  int code = kOk;
  auto engine = open_cli_engine(f.config, code, EngineUse::kInspect);
  if (!engine) return code;
  auto id = engine->enqueue(f.type, std::move(*args), options);
  if (!id) return report(id.error());
  fmt::print("{}\n", *id);
  return kOk;
}

}  // namespace

void add_enqueue(CLI::App& app, Action& action) {
  auto f = std::make_shared<EnqueueFlags>();
  auto* cmd = app.add_subcommand(
      "enqueue",
      "Enqueue one job and print its id. The arguments are checked against the job type before anything is "
      "written (exit 2 for an unknown type or a bad argument).");
  add_config_option(*cmd, f->config);
  cmd->add_option("TYPE", f->type, "The job type, as declared in [job.TYPE] of the config")->required();
  auto* arg = cmd->add_option("-a,--arg", f->args,
                              "An argument: NAME=VALUE (a string) or NAME:=JSON (a number, boolean, array or "
                              "object); repeat for more")
                  ->take_all()
                  ->allow_extra_args(false);
  auto* json =
      cmd->add_option("--json", f->json, "All arguments as one JSON object, e.g. '{\"name\": \"Heat\"}'");
  arg->excludes(json);
  auto* in = cmd->add_option("--in", f->in, "Run no sooner than this from now, e.g. 10m, 1h30m");
  auto* at = cmd->add_option(
      "--at", f->at, "Run no sooner than this time: 2026-11-30T08:00:00Z, ...+01:00, or @UNIX_SECONDS");
  in->excludes(at);
  cmd->add_option("--priority", f->priority, "Smaller runs first (default: the job type's)");
  cmd->add_option("--attempts", f->attempts, "Job attempts before it is dead (default: the job type's)");
  cmd->add_option("--queue", f->queue, "The queue (default: the job type's)");
  cmd->add_option("--unique", f->unique,
                  "A unique key: while a job with this key is pending or running, print its id instead");
  cmd->callback([f, &action] { action = [f] { return enqueue(*f); }; });
}

}  // namespace ratchet::cli

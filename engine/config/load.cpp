#include "config/load.hpp"

#include <algorithm>
#include <array>
#include <fstream>

#include <toml++/toml.h>

#include "config/depth_guard.hpp"
#include "config/reader.hpp"
#include "config/sections.hpp"
#include "config/template.hpp"

namespace ratchet::config {
namespace {

constexpr std::array<std::string_view, 4> kTopKeys = {"engine", "plugin", "job", "web"};

// A step that calls through a limit keyed by {{args.X}} needs its job to
// have X: an inferred argument list gains it, a declared one must hold it
// (else every call of the step would fail at run time).
void check_keyed_args(detail::Reader& r, Config& config) {
  for (auto& [job_name, job] : config.jobs) {
    for (const auto& step : job.steps) {
      auto plugin = config.plugins.find(step.plugin);
      if (plugin == config.plugins.end()) continue;
      std::vector<const LimitSpec*> limits;
      for (const auto& l : plugin->second.policy.limits) limits.push_back(&l);
      if (auto op = plugin->second.operations.find(step.operation); op != plugin->second.operations.end()) {
        for (const auto& l : op->second.limits) limits.push_back(&l);
      }
      for (const LimitSpec* l : limits) {
        if (!l->key) continue;
        for (const auto& expr : placeholders(nlohmann::json(*l->key))) {
          auto ref = parse_key_ref(expr);
          if (!ref || ref->root != TemplateRef::Root::kArgs) continue;
          const std::string& arg = ref->path.front();
          auto declared = std::ranges::find(job.args, arg, &ArgSpec::name);
          if (declared != job.args.end() && !declared->required) {
            // Enqueued without it, a job could never be admitted: each of
            // its attempts failed on the missing key, to the last.
            r.error(step.source, "step \"" + step.name + "\" calls " + step.plugin + "." + step.operation +
                                     ", whose limit (" + l->source.to_string() + ") is keyed by {{" +
                                     ref->text + "}}, but argument \"" + arg + "\" of [job." + job_name +
                                     "] is optional; make it required (drop the \"?\" from its type)");
            continue;
          }
          if (declared != job.args.end()) continue;
          if (job.args_inferred) {
            job.args.push_back(ArgSpec{arg, ArgType::kAny, true});
          } else {
            r.error(step.source, "step \"" + step.name + "\" calls " + step.plugin + "." + step.operation +
                                     ", whose limit (" + l->source.to_string() + ") is keyed by {{" +
                                     ref->text + "}}; declare argument \"" + arg + "\" in [job." + job_name +
                                     "] args");
          }
        }
      }
    }
  }
}

LoadResult load_document(std::string_view text, const std::string& file_name,
                         const std::filesystem::path& base, const std::filesystem::path& file_path,
                         const EnvLookup& env) {
  if (auto deep = detail::find_too_dotted_key(text, file_name)) {
    return std::unexpected(std::vector<Diagnostic>{std::move(*deep)});
  }
  detail::Reader r(file_name, env);
  toml::table doc;
#if TOML_EXCEPTIONS
  try {
    doc = toml::parse(text, file_name);
  } catch (const toml::parse_error& e) {
    r.error(e.source(), "", "TOML syntax error: " + std::string(e.description()));
    return std::unexpected(std::move(r.diagnostics()));
  }
#else
  auto parsed = toml::parse(text, file_name);
  if (!parsed) {
    r.error(parsed.error().source(), "", "TOML syntax error: " + std::string(parsed.error().description()));
    return std::unexpected(std::move(r.diagnostics()));
  }
  doc = std::move(parsed).table();
#endif
  if (auto deep = detail::find_too_deep_value(doc, file_name)) {
    return std::unexpected(std::vector<Diagnostic>{std::move(*deep)});
  }

  auto config = std::make_shared<Config>();
  config->file = file_path;
  r.check_keys(doc, "", kTopKeys, "the file (top level)");

  if (const toml::node* engine = doc.get("engine")) {
    if (const auto* t = r.table(*engine, "engine")) config->engine = detail::read_engine(r, *t, base);
  } else {
    toml::table empty;
    config->engine = detail::read_engine(r, empty, base);
  }
  if (const toml::node* plugins = doc.get("plugin")) {
    if (const auto* t = r.table(*plugins, "plugin")) {
      for (auto&& [key, value] : *t) {
        std::string name(key.str());
        if (const auto* p = r.table(value, detail::child_path("plugin", name))) {
          config->plugins.emplace(name, detail::read_plugin(r, name, *p));
        }
      }
    }
  }
  if (const toml::node* jobs = doc.get("job")) {
    if (const auto* t = r.table(*jobs, "job")) {
      for (auto&& [key, value] : *t) {
        std::string name(key.str());
        if (const auto* j = r.table(value, detail::child_path("job", name))) {
          config->jobs.emplace(name, detail::read_job(r, name, *j));
        }
      }
    }
  }
  if (const toml::node* web = doc.get("web")) {
    if (const auto* t = r.table(*web, "web")) config->web = detail::read_web(r, *t);
  }
  check_keyed_args(r, *config);
  config->env_keys = std::move(r.env_keys());
  config->secret_values = std::move(r.env_values());

  auto& diagnostics = r.diagnostics();
  if (!diagnostics.empty()) {
    std::stable_sort(diagnostics.begin(), diagnostics.end(), [](const Diagnostic& a, const Diagnostic& b) {
      return std::pair(a.where.line, a.where.column) < std::pair(b.where.line, b.where.column);
    });
    return std::unexpected(std::move(diagnostics));
  }
  return ConfigPtr(std::move(config));
}

}  // namespace

LoadResult load_file(const std::filesystem::path& path, const EnvLookup& env) {
  // A folder opens as an empty stream, which would read as an empty, valid
  // file.
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    return std::unexpected(std::vector<Diagnostic>{
        Diagnostic{SourceRef{path.string(), 0, 0, ""},
                   "is a directory, not a config file; name the TOML file itself (e.g. " +
                       (path / "ratchet.toml").string() + ")"}});
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) {
    return std::unexpected(std::vector<Diagnostic>{Diagnostic{
        SourceRef{path.string(), 0, 0, ""}, "cannot read the file (check that it exists and is readable)"}});
  }
  // Read one byte past the bound: a device or a runaway file is refused
  // before it fills the memory.
  std::string text(detail::kMaxConfigBytes + 1, '\0');
  in.read(text.data(), static_cast<std::streamsize>(text.size()));
  text.resize(static_cast<std::size_t>(in.gcount()));
  if (text.size() > detail::kMaxConfigBytes) {
    return std::unexpected(std::vector<Diagnostic>{
        Diagnostic{SourceRef{path.string(), 0, 0, ""},
                   "is larger than " + std::to_string(detail::kMaxConfigBytes / (1024 * 1024)) +
                       " MiB, far more than any config; check that the path names the TOML file"}});
  }
  std::filesystem::path absolute = std::filesystem::absolute(path, ec);
  if (ec) absolute = path;
  return load_document(text, path.string(), absolute.parent_path(), path, env);
}

LoadResult load_string(std::string_view text, const std::string& file_name, const EnvLookup& env) {
  std::filesystem::path file(file_name);
  return load_document(text, file_name, file.parent_path(), file, env);
}

}  // namespace ratchet::config

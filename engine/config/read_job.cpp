#include <algorithm>
#include <array>
#include <map>

#include "config/sections.hpp"
#include "config/suggest.hpp"
#include "config/template.hpp"

namespace ratchet::config::detail {
namespace {

constexpr std::array<std::string_view, 12> kJobKeys = {"attempts",   "backoff", "initial", "max",
                                                       "multiplier", "jitter",  "timeout", "queue",
                                                       "priority",   "args",    "steps",   "redact"};
constexpr std::array<std::string_view, 5> kBackoffKeys = {"kind", "initial", "max", "multiplier", "jitter"};
constexpr std::array<std::string_view, 5> kStepKeys = {"name", "call", "args", "after", "max_wait"};
constexpr std::array<std::string_view, 2> kArgDeclKeys = {"type", "required"};

// Names and types shape the job itself and are shown in summaries, so they
// cannot hide in the environment.
constexpr std::string_view kLiteral =
    "write this value literally: ${NAME} is for settings and arguments, not for names, calls, queues or "
    "types";

bool valid_name(std::string_view name) {
  if (name.empty()) return false;
  for (char c : name) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

// The TOML nodes of a step, kept while validating so errors found across
// steps still point at the right line.
struct StepNodes {
  const toml::table* table = nullptr;
  std::string path;
  const toml::node* name = nullptr;
  const toml::node* args = nullptr;
  std::vector<std::pair<const toml::node*, std::string>> after;  // node, target name
  bool valid = false;                                            // has a usable name
};

void apply_backoff_field(Reader& r, const std::string& k, const toml::node& value, const std::string& at,
                         BackoffSpec& b) {
  if (k == "kind" || k == "backoff") {
    if (auto v = r.choice<Backoff>(value, at,
                                   {{"constant", Backoff::kConstant},
                                    {"linear", Backoff::kLinear},
                                    {"exponential", Backoff::kExponential},
                                    {"decorrelated", Backoff::kDecorrelated}})) {
      b.kind = *v;
    }
  } else if (k == "initial") {
    if (auto v = r.duration(value, at, Bound::kPositive)) b.initial = *v;
  } else if (k == "max") {
    if (auto v = r.duration(value, at, Bound::kPositive)) b.max = *v;
  } else if (k == "multiplier") {
    if (auto v = r.number(value, at)) {
      if (*v < 1.0 || *v > 100.0) {
        r.error(value, at, "must be between 1 and 100");
      } else {
        b.multiplier = *v;
      }
    }
  } else if (k == "jitter") {
    if (auto v = r.choice<Jitter>(
            value, at, {{"none", Jitter::kNone}, {"full", Jitter::kFull}, {"equal", Jitter::kEqual}})) {
      b.jitter = *v;
    }
  }
}

std::optional<ArgType> arg_type(std::string_view word) {
  static const std::map<std::string_view, ArgType> kTypes = {
      {"string", ArgType::kString},   {"number", ArgType::kNumber}, {"integer", ArgType::kInteger},
      {"boolean", ArgType::kBoolean}, {"object", ArgType::kObject}, {"array", ArgType::kArray},
      {"any", ArgType::kAny}};
  auto it = kTypes.find(word);
  if (it == kTypes.end()) return std::nullopt;
  return it->second;
}

constexpr std::array<std::string_view, 7> kTypeNames = {"string", "number", "integer", "boolean",
                                                        "object", "array",  "any"};

void report_bad_type(Reader& r, const toml::node& node, const std::string& at, const Text& t) {
  if (t.from_env) {
    r.error(node, at, std::string(kLiteral));
    return;
  }
  r.error(node, at,
          "\"" + t.value + "\" is not an argument type" + did_you_mean(t.value, kTypeNames) +
              " (string, number, integer, boolean, object, array or any; add \"?\" for optional)");
}

std::vector<ArgSpec> read_arg_decls(Reader& r, const toml::node& node, const std::string& path) {
  std::vector<ArgSpec> out;
  const auto* t = r.table(node, path);
  if (t == nullptr) return out;
  for (auto&& [key, value] : *t) {
    const std::string name(key.str());
    const std::string at = child_path(path, name);
    ArgSpec a;
    a.name = name;
    if (value.is_string()) {
      auto text = r.string(value, at);
      if (!text) {
        out.push_back(std::move(a));  // still declared: no follow-on errors
        continue;
      }
      if (text->from_env) {
        report_bad_type(r, value, at, *text);
        out.push_back(std::move(a));  // still declared: no follow-on errors
        continue;
      }
      std::string word = text->value;
      if (!word.empty() && word.back() == '?') {
        a.required = false;
        word.pop_back();
      }
      auto type = arg_type(word);
      if (!type) {
        report_bad_type(r, value, at, Text{word, text->from_env});
        out.push_back(std::move(a));  // still declared: no follow-on errors
        continue;
      }
      a.type = *type;
    } else if (const auto* decl = value.as_table()) {
      r.check_keys(*decl, at, kArgDeclKeys, "an argument declaration");
      if (const toml::node* type_node = decl->get("type")) {
        if (auto text = r.string(*type_node, child_path(at, "type"))) {
          auto type = text->from_env ? std::nullopt : arg_type(text->value);
          if (!type) {
            report_bad_type(r, *type_node, child_path(at, "type"), *text);
            out.push_back(std::move(a));  // still declared: no follow-on errors
            continue;
          }
          a.type = *type;
        }
      }
      if (const toml::node* req = decl->get("required")) {
        if (auto v = r.boolean(*req, child_path(at, "required"))) a.required = *v;
      }
    } else {
      r.error(value, at,
              "expected a type such as \"string\" or \"integer?\", or a table {type, required}, got " +
                  std::string(type_name(value)));
      out.push_back(std::move(a));  // still declared: no follow-on errors
      continue;
    }
    out.push_back(std::move(a));
  }
  return out;
}

std::optional<StepSpec> read_step(Reader& r, const toml::node& node, const std::string& path,
                                  StepNodes& nodes) {
  nodes.path = path;
  const auto* t = r.table(node, path);
  if (t == nullptr) return std::nullopt;
  nodes.table = t;
  r.check_keys(*t, path, kStepKeys, "a step");
  StepSpec s;
  s.source = r.ref(*t, path);
  r.require(*t, path, "name");
  r.require(*t, path, "call");
  for (auto&& [key, value] : *t) {
    const std::string k(key.str());
    const std::string at = child_path(path, k);
    if (k == "name") {
      nodes.name = &value;
      if (auto v = r.string(value, at)) {
        if (!valid_name(v->value) || v->from_env) {
          r.error(
              value, at,
              v->from_env ? std::string(kLiteral) : "a step name holds only letters, digits, '_' and '-'");
        } else {
          s.name = v->value;
          nodes.valid = true;
        }
      }
    } else if (k == "call") {
      if (auto v = r.string(value, at)) {
        if (v->from_env) {
          r.error(value, at, std::string(kLiteral));
          continue;
        }
        auto dot = v->value.find('.');
        std::string plugin = dot == std::string::npos ? "" : v->value.substr(0, dot);
        std::string op = dot == std::string::npos ? "" : v->value.substr(dot + 1);
        if (!valid_name(plugin) || !valid_name(op)) {
          r.error(value, at,
                  "\"" + v->value + "\" is not of the form plugin.operation (e.g. \"imdb.get_rating\")");
        } else {
          s.plugin = plugin;
          s.operation = op;
        }
      }
    } else if (k == "args") {
      nodes.args = &value;
      if (r.table(value, at) != nullptr) s.args = r.to_json(value, at, "", s.secret_paths);
    } else if (k == "after") {
      const auto* a = r.array(value, at);
      if (a == nullptr) continue;
      for (std::size_t i = 0; i < a->size(); ++i) {
        if (auto v = r.string(*a->get(i), index_path(at, i))) {
          if (v->from_env) {
            r.error(*a->get(i), index_path(at, i), std::string(kLiteral));
            continue;
          }
          s.after.push_back(v->value);
          nodes.after.emplace_back(a->get(i), v->value);
        }
      }
    } else if (k == "max_wait") {
      if (auto v = r.duration(value, at, Bound::kNonNegative)) s.max_wait = *v;
    }
  }
  return s;
}

// Everything a step waits for, directly or through other steps.
std::set<std::string> ancestors(const std::string& step,
                                const std::map<std::string, const StepSpec*>& by_name) {
  std::set<std::string> seen;
  std::vector<std::string> todo = {step};
  while (!todo.empty()) {
    std::string s = todo.back();
    todo.pop_back();
    auto it = by_name.find(s);
    if (it == by_name.end()) continue;
    for (const auto& dep : it->second->after) {
      if (by_name.contains(dep) && seen.insert(dep).second) todo.push_back(dep);
    }
  }
  return seen;
}

void check_cycles(Reader& r, const std::vector<StepSpec>& steps, const std::vector<StepNodes>& nodes,
                  const std::map<std::string, const StepSpec*>& by_name) {
  std::map<std::string, std::size_t> index;
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (nodes[i].valid) index.emplace(steps[i].name, i);
  }
  enum class Color { kWhite, kGrey, kBlack };
  std::map<std::string, Color> color;
  std::vector<std::string> stack;
  std::set<std::vector<std::string>> reported;

  auto visit = [&](auto&& self, const std::string& name) -> void {
    color[name] = Color::kGrey;
    stack.push_back(name);
    const StepSpec* s = by_name.at(name);
    const StepNodes& n = nodes[index.at(name)];
    for (std::size_t i = 0; i < s->after.size(); ++i) {
      const std::string& dep = s->after[i];
      if (!by_name.contains(dep) || dep == name) continue;  // reported elsewhere
      Color c = color[dep];
      if (c == Color::kGrey) {
        auto from = std::find(stack.begin(), stack.end(), dep);
        std::vector<std::string> cycle(from, stack.end());
        std::vector<std::string> key = cycle;
        std::rotate(key.begin(), std::min_element(key.begin(), key.end()), key.end());
        if (!reported.insert(key).second) continue;
        // Written in the direction of waiting: each waits for the next.
        std::string text;
        for (const auto& step : cycle) text += step + " -> ";
        text += cycle.front();
        std::string at = child_path(n.path, "after");
        const toml::node* where = n.table;
        for (std::size_t k = 0; k < n.after.size(); ++k) {
          if (n.after[k].second == dep) {
            where = n.after[k].first;
            at = index_path(child_path(n.path, "after"), k);
          }
        }
        r.error(*where, at,
                "steps wait for each other in a cycle: " + text +
                    " (each waits for the next); remove one `after`");
      } else if (c == Color::kWhite) {
        self(self, dep);
      }
    }
    stack.pop_back();
    color[name] = Color::kBlack;
  };
  for (std::size_t i = 0; i < steps.size(); ++i) {
    if (!nodes[i].valid) continue;
    if (color[steps[i].name] == Color::kWhite) visit(visit, steps[i].name);
  }
}

void check_steps(Reader& r, JobTypeSpec& job, const std::vector<StepNodes>& nodes, bool args_declared) {
  std::map<std::string, const StepSpec*> by_name;
  std::map<std::string, const StepNodes*> first_nodes;
  std::vector<std::string> names;
  for (std::size_t i = 0; i < job.steps.size(); ++i) {
    if (!nodes[i].valid) continue;
    const auto& s = job.steps[i];
    if (auto it = first_nodes.find(s.name); it != first_nodes.end()) {
      r.error(*nodes[i].name, child_path(nodes[i].path, "name"),
              "duplicate step name \"" + s.name + "\" (first declared at line " +
                  std::to_string(it->second->name->source().begin.line) +
                  "); step names must be unique in a job");
      continue;
    }
    by_name.emplace(s.name, &s);
    first_nodes.emplace(s.name, &nodes[i]);
    names.push_back(s.name);
  }

  for (std::size_t i = 0; i < job.steps.size(); ++i) {
    const auto& s = job.steps[i];
    const auto& n = nodes[i];
    for (std::size_t k = 0; k < n.after.size(); ++k) {
      const auto& [node, target] = n.after[k];
      const std::string at = index_path(child_path(n.path, "after"), k);
      if (n.valid && target == s.name) {
        r.error(*node, at, "a step cannot wait for itself");
      } else if (!by_name.contains(target)) {
        r.error(*node, at, "no step named \"" + target + "\" in this job" + did_you_mean(target, names));
      }
    }
  }

  check_cycles(r, job.steps, nodes, by_name);

  std::set<std::string> declared;
  for (const auto& a : job.args) declared.insert(a.name);
  std::vector<std::string> declared_names(declared.begin(), declared.end());
  std::set<std::string> inferred;

  for (std::size_t i = 0; i < job.steps.size(); ++i) {
    const auto& s = job.steps[i];
    const auto& n = nodes[i];
    if (n.args == nullptr) continue;
    std::set<std::string> waits_for = n.valid ? ancestors(s.name, by_name) : std::set<std::string>{};
    std::vector<Reader::StringNode> strings;
    Reader::collect_strings(*n.args, child_path(n.path, "args"), strings);
    for (const auto& str : strings) {
      for (const auto& problem : template_errors(nlohmann::json(str.text)))
        r.error(*str.node, str.path, problem);
      for (const auto& expr : placeholders(nlohmann::json(str.text))) {
        auto ref = parse_template_ref(expr);
        if (!ref) continue;  // reported above
        if (ref->root == TemplateRef::Root::kArgs) {
          const std::string& arg = ref->path.front();
          if (args_declared) {
            if (!declared.contains(arg)) {
              r.error(*str.node, str.path,
                      "placeholder {{" + ref->text + "}} reads argument \"" + arg +
                          "\", which this job does not declare" + did_you_mean(arg, declared_names));
            }
          } else {
            inferred.insert(arg);
          }
          continue;
        }
        if (!by_name.contains(ref->step)) {
          r.error(*str.node, str.path,
                  "placeholder {{" + ref->text + "}} reads step \"" + ref->step +
                      "\", which this job does not have" + did_you_mean(ref->step, names));
        } else if (n.valid && ref->step == s.name) {
          r.error(*str.node, str.path, "placeholder {{" + ref->text + "}} reads the output of its own step");
        } else if (n.valid && !waits_for.contains(ref->step)) {
          r.error(*str.node, str.path,
                  "placeholder {{" + ref->text + "}} reads step \"" + ref->step + "\", which step \"" +
                      s.name + "\" does not wait for; add \"" + ref->step + "\" to its `after`");
        }
      }
    }
  }
  if (!args_declared) {
    job.args_inferred = true;
    for (const auto& name : inferred) job.args.push_back(ArgSpec{name, ArgType::kAny, true});
  }
}

}  // namespace

JobTypeSpec read_job(Reader& r, const std::string& name, const toml::table& t) {
  const std::string path = child_path("job", name);
  JobTypeSpec job;
  job.name = name;
  job.source = r.ref(t, path);
  if (!valid_name(name)) r.error(t, path, "a job type name holds only letters, digits, '_' and '-'");
  r.check_keys(t, path, kJobKeys, "a job type");
  std::vector<StepNodes> nodes;
  bool args_declared = false;
  std::vector<std::pair<const toml::node*, std::string>> redacted;  // each name with its place
  for (auto&& [key, value] : t) {
    const std::string k(key.str());
    const std::string at = child_path(path, k);
    if (k == "attempts") {
      if (auto v = r.integer(value, at, 1, 100'000)) job.attempts = static_cast<int>(*v);
    } else if (k == "backoff" && value.is_table()) {
      r.check_keys(*value.as_table(), at, kBackoffKeys, "a backoff");
      for (auto&& [bkey, bvalue] : *value.as_table()) {
        apply_backoff_field(r, std::string(bkey.str()), bvalue, child_path(at, bkey.str()), job.backoff);
      }
    } else if (k == "backoff" || k == "initial" || k == "max" || k == "multiplier" || k == "jitter") {
      apply_backoff_field(r, k, value, at, job.backoff);
    } else if (k == "timeout") {
      if (auto v = r.duration(value, at, Bound::kPositive)) job.timeout = *v;
    } else if (k == "queue") {
      if (auto v = r.string(value, at)) {
        if (v->from_env) {
          r.error(value, at, std::string(kLiteral));
        } else if (!valid_name(v->value)) {
          r.error(value, at, "a queue name holds only letters, digits, '_' and '-'");
        } else {
          job.queue = v->value;
        }
      }
    } else if (k == "priority") {
      if (auto v = r.integer(value, at, -1'000'000, 1'000'000)) job.priority = static_cast<int>(*v);
    } else if (k == "args") {
      args_declared = value.is_table();
      job.args = read_arg_decls(r, value, at);
    } else if (k == "redact") {
      const auto* a = r.array(value, at);
      if (a == nullptr) continue;
      for (std::size_t i = 0; i < a->size(); ++i) {
        const std::string item = index_path(at, i);
        auto v = r.string(*a->get(i), item);
        if (!v) continue;
        if (v->from_env) {
          r.error(*a->get(i), item, std::string(kLiteral));
        } else if (v->value.empty()) {
          r.error(*a->get(i), item, "name an argument of the job, e.g. redact = [\"email\"]");
        } else {
          job.redact.push_back(v->value);
          redacted.emplace_back(a->get(i), item);
        }
      }
    } else if (k == "steps") {
      const auto* a = r.array(value, at);
      if (a == nullptr) continue;
      if (a->empty()) r.error(value, at, "a job type needs at least one step");
      for (std::size_t i = 0; i < a->size(); ++i) {
        StepNodes n;
        auto step = read_step(r, *a->get(i), index_path(at, i), n);
        if (!step) continue;
        job.steps.push_back(std::move(*step));
        nodes.push_back(std::move(n));
      }
    }
  }
  if (!t.contains("steps"))
    r.error(t, path, "\"steps\" is required here: a job type needs at least one step");
  if (job.backoff.initial > job.backoff.max) {
    r.error(t, path, "backoff initial is longer than max; make max at least initial");
  }
  check_steps(r, job, nodes, args_declared);
  if (args_declared) {
    // A misspelt name would leave the argument it meant shown everywhere.
    std::vector<std::string> declared;
    for (const auto& a : job.args) declared.push_back(a.name);
    for (std::size_t i = 0; i < redacted.size(); ++i) {
      const std::string& arg = job.redact[i];
      if (std::ranges::find(declared, arg) != declared.end()) continue;
      r.error(*redacted[i].first, redacted[i].second,
              "\"" + arg + "\" is not an argument of this job, so nothing would be redacted" +
                  did_you_mean(arg, declared));
    }
  }
  return job;
}

}  // namespace ratchet::config::detail

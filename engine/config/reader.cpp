#include "config/reader.hpp"

#include <sstream>

#include "common/duration.hpp"
#include "config/bounds.hpp"
#include "config/env.hpp"
#include "config/suggest.hpp"

namespace ratchet::config::detail {
namespace {

bool bare_key(std::string_view key) {
  if (key.empty()) return false;
  for (char c : key) {
    bool ok =
        (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
    if (!ok) return false;
  }
  return true;
}

std::string escape_pointer(std::string_view key) {
  std::string out;
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

}  // namespace

std::string child_path(std::string_view parent, std::string_view key) {
  std::string out(parent);
  if (!out.empty()) out += '.';
  if (bare_key(key)) {
    out += key;
  } else {
    out += '"';
    for (char c : key) {
      if (c == '"' || c == '\\') out += '\\';
      out += c;
    }
    out += '"';
  }
  return out;
}

std::string index_path(std::string_view parent, std::size_t index) {
  return std::string(parent) + "[" + std::to_string(index) + "]";
}

std::string_view type_name(const toml::node& node) {
  switch (node.type()) {
    case toml::node_type::table: return "a table";
    case toml::node_type::array: return "an array";
    case toml::node_type::string: return "a string";
    case toml::node_type::integer: return "an integer";
    case toml::node_type::floating_point: return "a float";
    case toml::node_type::boolean: return "a boolean";
    case toml::node_type::date: return "a date";
    case toml::node_type::time: return "a time";
    case toml::node_type::date_time: return "a date-time";
    case toml::node_type::none: break;
  }
  return "nothing";
}

SourceRef Reader::ref(const toml::source_region& at, std::string path) const {
  return SourceRef{file_, static_cast<int>(at.begin.line), static_cast<int>(at.begin.column),
                   std::move(path)};
}

void Reader::error(const toml::source_region& at, std::string path, std::string message) {
  diagnostics_.push_back(Diagnostic{ref(at, std::move(path)), std::move(message)});
}

void Reader::check_keys(const toml::table& table, std::string_view path,
                        std::span<const std::string_view> allowed, std::string_view what) {
  for (auto&& [key, value] : table) {
    std::string_view k = key.str();
    bool known = false;
    for (auto a : allowed) known = known || a == k;
    if (known) continue;
    std::string m =
        "unknown key \"" + std::string(k) + "\" in " + std::string(what) + did_you_mean(k, allowed);
    std::string keys;
    for (auto a : allowed) keys += (keys.empty() ? "" : ", ") + std::string(a);
    m += "; allowed keys: " + keys;
    error(key.source(), child_path(path, k), std::move(m));
  }
}

bool Reader::require(const toml::table& table, std::string_view path, std::string_view key) {
  if (table.contains(key)) return true;
  error(table, std::string(path), "\"" + std::string(key) + "\" is required here");
  return false;
}

const toml::table* Reader::table(const toml::node& node, std::string_view path) {
  if (const auto* t = node.as_table()) return t;
  error(node, std::string(path), "expected a table, got " + std::string(type_name(node)));
  return nullptr;
}

const toml::array* Reader::array(const toml::node& node, std::string_view path) {
  if (const auto* a = node.as_array()) return a;
  error(node, std::string(path), "expected an array, got " + std::string(type_name(node)));
  return nullptr;
}

std::optional<Text> Reader::string(const toml::node& node, std::string_view path) {
  const auto* s = node.as_string();
  if (s == nullptr) {
    error(node, std::string(path), "expected a string, got " + std::string(type_name(node)));
    return std::nullopt;
  }
  auto expanded = expand_env(s->get(), env_);
  if (expanded.error) {
    error(node, std::string(path), *expanded.error);
    return std::nullopt;
  }
  if (!expanded.missing.empty()) {
    for (const auto& name : expanded.missing) {
      error(node, std::string(path),
            "environment variable " + name + " is not set (referenced as ${" + name + "})");
    }
    return std::nullopt;
  }
  if (expanded.used_env) env_keys_.insert(std::string(path));
  for (auto& v : expanded.values) env_values_.insert(std::move(v));
  return Text{std::move(expanded.value), expanded.used_env};
}

std::optional<std::int64_t> Reader::integer(const toml::node& node, std::string_view path, std::int64_t min,
                                            std::int64_t max) {
  const auto* i = node.as_integer();
  if (i == nullptr) {
    error(node, std::string(path), "expected an integer, got " + std::string(type_name(node)));
    return std::nullopt;
  }
  std::int64_t v = i->get();
  if (v < min || v > max) {
    std::string range = max == INT64_MAX ? "at least " + std::to_string(min)
                                         : "between " + std::to_string(min) + " and " + std::to_string(max);
    error(node, std::string(path), "must be " + range + ", got " + std::to_string(v));
    return std::nullopt;
  }
  return v;
}

std::optional<double> Reader::number(const toml::node& node, std::string_view path) {
  if (const auto* f = node.as_floating_point()) return f->get();
  if (const auto* i = node.as_integer()) return static_cast<double>(i->get());
  error(node, std::string(path), "expected a number, got " + std::string(type_name(node)));
  return std::nullopt;
}

std::optional<bool> Reader::boolean(const toml::node& node, std::string_view path) {
  if (const auto* b = node.as_boolean()) return b->get();
  error(node, std::string(path), "expected true or false, got " + std::string(type_name(node)));
  return std::nullopt;
}

std::optional<microseconds> Reader::duration(const toml::node& node, std::string_view path, Bound bound) {
  if (node.is_integer() || node.is_floating_point()) {
    error(node, std::string(path),
          "a duration needs a unit: write e.g. \"250ms\", \"10s\", \"5m\", \"1h\" or \"1d\"");
    return std::nullopt;
  }
  if (!node.is_string()) {
    error(node, std::string(path),
          "expected a duration string such as \"10s\", got " + std::string(type_name(node)));
    return std::nullopt;
  }
  auto text = string(node, path);
  if (!text) return std::nullopt;
  // The value is quoted only when written in the file: one from the
  // environment may be a secret.
  const std::string got = text->from_env ? "" : ", got " + text->value;
  if (auto length = common::duration_micros(text->value);
      length && *length > static_cast<long double>(kMaxDuration.count())) {
    error(node, std::string(path),
          std::string("must be at most ") + kMaxDurationText + got + " (a longer one makes no sense here)");
    return std::nullopt;
  }
  auto d = common::parse_duration(text->value);
  if (!d) {
    // The parser quotes its input; a value from the environment must not be shown.
    error(node, std::string(path),
          text->from_env
              ? "the value from the environment is not a duration (write e.g. 250ms, 10s, 5m, 1h or 1d)"
              : d.error().message());
    return std::nullopt;
  }
  if (bound == Bound::kPositive && d->count() <= 0) {
    error(node, std::string(path), "must be longer than 0s");
    return std::nullopt;
  }
  if (bound == Bound::kLimitPeriod && *d < kMinLimitPeriod) {
    error(node, std::string(path),
          "must be at least 1ms" + got +
              " (a request takes longer than that to reach a server, so a shorter window cannot be kept; "
              "for a fast limit raise `rate` over a longer `per`, e.g. rate = 1000, per = \"1s\")");
    return std::nullopt;
  }
  if (bound == Bound::kTimeout && *d < kMinTimeout) {
    error(node, std::string(path),
          "must be at least 1ms" + got +
              " (libcurl counts whole milliseconds; a shorter timeout would time "
              "every call out)");
    return std::nullopt;
  }
  return *d;
}

void Reader::report_choice(const toml::node& node, std::string_view path, const Text& text,
                           std::span<const std::string_view> names) {
  std::string list;
  for (auto n : names) list += (list.empty() ? "\"" : ", \"") + std::string(n) + "\"";
  if (text.from_env) {
    error(node, std::string(path), "the value from the environment is not one of " + list);
  } else {
    error(node, std::string(path),
          "\"" + text.value + "\" is not one of " + list + did_you_mean(text.value, names));
  }
}

nlohmann::json Reader::to_json(const toml::node& node, std::string_view path, const std::string& pointer,
                               std::set<std::string>& secrets) {
  switch (node.type()) {
    case toml::node_type::table: {
      nlohmann::json out = nlohmann::json::object();
      for (auto&& [key, value] : *node.as_table()) {
        out[std::string(key.str())] =
            to_json(value, child_path(path, key.str()), pointer + "/" + escape_pointer(key.str()), secrets);
      }
      return out;
    }
    case toml::node_type::array: {
      nlohmann::json out = nlohmann::json::array();
      std::size_t i = 0;
      for (const auto& item : *node.as_array()) {
        out.push_back(to_json(item, index_path(path, i), pointer + "/" + std::to_string(i), secrets));
        ++i;
      }
      return out;
    }
    case toml::node_type::string: {
      auto text = string(node, path);
      if (!text) return nullptr;
      if (text->from_env) {
        secrets.insert(pointer);
        // A secret is tracked by its pointer, not as an env key of the config.
        env_keys_.erase(std::string(path));
      }
      return text->value;
    }
    case toml::node_type::integer: return node.as_integer()->get();
    case toml::node_type::floating_point: return node.as_floating_point()->get();
    case toml::node_type::boolean: return node.as_boolean()->get();
    case toml::node_type::date:
    case toml::node_type::time:
    case toml::node_type::date_time: {
      std::ostringstream text;
      if (const auto* d = node.as_date()) text << d->get();
      if (const auto* t = node.as_time()) text << t->get();
      if (const auto* dt = node.as_date_time()) text << dt->get();
      return text.str();
    }
    case toml::node_type::none: break;
  }
  return nullptr;
}

void Reader::collect_strings(const toml::node& node, const std::string& path, std::vector<StringNode>& out) {
  if (const auto* s = node.as_string()) {
    out.push_back({&node, path, s->get()});
  } else if (const auto* t = node.as_table()) {
    for (auto&& [key, value] : *t) collect_strings(value, child_path(path, key.str()), out);
  } else if (const auto* a = node.as_array()) {
    for (std::size_t i = 0; i < a->size(); ++i) collect_strings(*a->get(i), index_path(path, i), out);
  }
}

}  // namespace ratchet::config::detail

// Typed, position-aware reading of a parsed TOML document for the loader.
//
// A Reader turns toml++ nodes into values, checking type, range and allowed
// keys, and records a Diagnostic (file, line, column, key path) for every
// problem instead of stopping. Getters return nullopt after reporting, so
// callers simply keep the default and go on.
//
// One Reader serves one load on one thread. Internal to the config part.
#pragma once

#include <chrono>
#include <cstdint>
#include <initializer_list>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <toml++/toml.h>
#include <nlohmann/json.hpp>

#include "config/diagnostic.hpp"
#include "config/load.hpp"

namespace ratchet::config::detail {

using std::chrono::microseconds;

// "plugin" + "imdb" -> "plugin.imdb"; keys that are not bare TOML keys are quoted.
std::string child_path(std::string_view parent, std::string_view key);
// "job.x.steps" + 2 -> "job.x.steps[2]"
std::string index_path(std::string_view parent, std::size_t index);

// A string value after ${NAME} expansion.
struct Text {
  std::string value;
  bool from_env = false;
};

// Every duration is also at most kMaxDuration (config/bounds.hpp); kTimeout
// is at least kMinTimeout.
enum class Bound { kPositive, kNonNegative, kTimeout, kLimitPeriod };

class Reader {
 public:
  Reader(std::string file, const EnvLookup& env) : file_(std::move(file)), env_(env) {}

  std::vector<Diagnostic>& diagnostics() { return diagnostics_; }

  SourceRef ref(const toml::source_region& at, std::string path) const;
  SourceRef ref(const toml::node& at, std::string path) const { return ref(at.source(), std::move(path)); }
  void error(const toml::source_region& at, std::string path, std::string message);
  void error(SourceRef at, std::string message) {
    diagnostics_.push_back(Diagnostic{std::move(at), std::move(message)});
  }
  void error(const toml::node& at, std::string path, std::string message) {
    error(at.source(), std::move(path), std::move(message));
  }

  // Reports every key of `table` outside `allowed`, suggesting the nearest.
  void check_keys(const toml::table& table, std::string_view path, std::span<const std::string_view> allowed,
                  std::string_view what);
  // Reports a missing required key at the table.
  bool require(const toml::table& table, std::string_view path, std::string_view key);

  const toml::table* table(const toml::node& node, std::string_view path);
  const toml::array* array(const toml::node& node, std::string_view path);
  std::optional<Text> string(const toml::node& node, std::string_view path);
  std::optional<std::int64_t> integer(const toml::node& node, std::string_view path, std::int64_t min,
                                      std::int64_t max);
  std::optional<double> number(const toml::node& node, std::string_view path);
  std::optional<bool> boolean(const toml::node& node, std::string_view path);
  std::optional<microseconds> duration(const toml::node& node, std::string_view path, Bound bound);

  // One of a fixed set of words, e.g. "sliding_window".
  template <typename E>
  std::optional<E> choice(const toml::node& node, std::string_view path,
                          std::initializer_list<std::pair<std::string_view, E>> options) {
    auto text = string(node, path);
    if (!text) return std::nullopt;
    std::vector<std::string_view> names;
    for (const auto& [name, value] : options) {
      if (name == text->value) return value;
      names.push_back(name);
    }
    report_choice(node, path, *text, names);
    return std::nullopt;
  }

  // Converts a free-form TOML value to JSON, expanding ${NAME} in strings and
  // adding the JSON pointer of every such string to `secrets`.
  nlohmann::json to_json(const toml::node& node, std::string_view path, const std::string& pointer,
                         std::set<std::string>& secrets);

  // Every string inside `node` (recursively) with its node and key path.
  struct StringNode {
    const toml::node* node;
    std::string path;
    std::string text;  // as written, before ${NAME} expansion
  };
  static void collect_strings(const toml::node& node, const std::string& path, std::vector<StringNode>& out);

  // Key paths of reserved values that came from the environment.
  std::set<std::string>& env_keys() { return env_keys_; }
  // Every value a ${NAME} reference was replaced by, anywhere in the file.
  std::set<std::string>& env_values() { return env_values_; }

 private:
  void report_choice(const toml::node& node, std::string_view path, const Text& text,
                     std::span<const std::string_view> names);

  std::string file_;
  const EnvLookup& env_;
  std::vector<Diagnostic> diagnostics_;
  std::set<std::string> env_keys_;
  std::set<std::string> env_values_;
};

// A short name for a TOML node's type: "a string", "an integer", ...
std::string_view type_name(const toml::node& node);

}  // namespace ratchet::config::detail

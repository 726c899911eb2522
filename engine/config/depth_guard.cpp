#include "config/depth_guard.hpp"

#include <utility>
#include <vector>

namespace ratchet::config::detail {
namespace {

bool bare_key_char(char c) {
  return (c >= 'A' && c <= 'Z') || (c >= 'a' && c <= 'z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
}

void skip_blanks(std::string_view text, std::size_t& i) {
  while (i < text.size() && (text[i] == ' ' || text[i] == '\t')) ++i;
}

// Moves `i` past one key part at `i` (bare, "basic" or 'literal', on one
// line); false when none starts there.
bool skip_key_part(std::string_view text, std::size_t& i) {
  if (i >= text.size()) return false;
  const char open = text[i];
  if (bare_key_char(open)) {
    while (i < text.size() && bare_key_char(text[i])) ++i;
    return true;
  }
  if (open != '"' && open != '\'') return false;
  std::size_t j = i + 1;
  while (j < text.size() && text[j] != open && text[j] != '\n') {
    if (open == '"' && text[j] == '\\' && j + 1 < text.size()) ++j;
    ++j;
  }
  if (j >= text.size() || text[j] != open) return false;
  i = j + 1;
  return true;
}

SourceRef at_offset(std::string_view text, std::size_t offset, const std::string& file) {
  int line = 1;
  std::size_t line_start = 0;
  for (std::size_t i = 0; i < offset; ++i) {
    if (text[i] == '\n') {
      ++line;
      line_start = i + 1;
    }
  }
  return SourceRef{file, line, static_cast<int>(offset - line_start) + 1, ""};
}

}  // namespace

std::optional<Diagnostic> find_too_dotted_key(std::string_view text, const std::string& file) {
  std::size_t i = 0;
  while (i < text.size()) {
    const std::size_t start = i;
    std::size_t j = i;
    if (!skip_key_part(text, j)) {
      ++i;
      continue;
    }
    std::size_t dots = 0;
    std::size_t end = j;
    for (;;) {
      std::size_t k = end;
      skip_blanks(text, k);
      if (k >= text.size() || text[k] != '.') break;
      ++k;
      skip_blanks(text, k);
      if (!skip_key_part(text, k)) break;
      ++dots;
      end = k;
    }
    if (dots > kMaxKeyDots) {
      std::size_t k = end;
      skip_blanks(text, k);
      // Only a key: one in a header ends at `]`, one of a value at `=`.
      if (k < text.size() && (text[k] == '=' || text[k] == ']')) {
        return Diagnostic{at_offset(text, start, file),
                          "a key of " + std::to_string(dots + 1) +
                              " dotted parts nests deeper than any setting (at most " +
                              std::to_string(kMaxKeyDots + 1) +
                              " parts are read); check the key, or write a deep value as a string"};
      }
    }
    i = end > start ? end : start + 1;
  }
  return std::nullopt;
}

std::optional<Diagnostic> find_too_deep_value(const toml::table& doc, const std::string& file) {
  std::vector<std::pair<const toml::node*, std::size_t>> todo{{&doc, 0}};
  while (!todo.empty()) {
    auto [node, depth] = todo.back();
    todo.pop_back();
    if (depth > kMaxConfigDepth) {
      const auto& where = node->source().begin;
      return Diagnostic{SourceRef{file, static_cast<int>(where.line), static_cast<int>(where.column), ""},
                        "a value nested more than " + std::to_string(kMaxConfigDepth) +
                            " tables or arrays deep; no setting is nested that deep, so check the "
                            "keys and brackets around it"};
    }
    if (const auto* t = node->as_table()) {
      for (auto&& [key, value] : *t) todo.emplace_back(&value, depth + 1);
    } else if (const auto* a = node->as_array()) {
      for (const auto& item : *a) todo.emplace_back(&item, depth + 1);
    }
  }
  return std::nullopt;
}

}  // namespace ratchet::config::detail

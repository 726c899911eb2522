#include "config/suggest.hpp"

#include <algorithm>
#include <cctype>
#include <vector>

namespace ratchet::config {
namespace {

std::size_t threshold(std::size_t length) {
  if (length <= 4) return 1;
  if (length <= 8) return 2;
  return 3;
}

template <typename S>
std::optional<std::string> closest(std::string_view word, std::span<const S> candidates) {
  std::optional<std::string> best;
  std::size_t best_distance = threshold(word.size()) + 1;
  for (const auto& c : candidates) {
    std::string_view cv(c);
    if (cv == word) continue;
    std::size_t d = edit_distance(word, cv);
    if (d < best_distance) {
      best_distance = d;
      best = std::string(cv);
    }
  }
  return best;
}

std::string phrase(const std::optional<std::string>& match) {
  return match ? " (did you mean \"" + *match + "\"?)" : std::string();
}

}  // namespace

std::size_t edit_distance(std::string_view a, std::string_view b) {
  auto lower = [](char c) { return static_cast<char>(std::tolower(static_cast<unsigned char>(c))); };
  const std::size_t n = a.size(), m = b.size();
  std::vector<std::vector<std::size_t>> d(n + 1, std::vector<std::size_t>(m + 1));
  for (std::size_t i = 0; i <= n; ++i) d[i][0] = i;
  for (std::size_t j = 0; j <= m; ++j) d[0][j] = j;
  for (std::size_t i = 1; i <= n; ++i) {
    for (std::size_t j = 1; j <= m; ++j) {
      std::size_t cost = lower(a[i - 1]) == lower(b[j - 1]) ? 0 : 1;
      d[i][j] = std::min({d[i - 1][j] + 1, d[i][j - 1] + 1, d[i - 1][j - 1] + cost});
      if (i > 1 && j > 1 && lower(a[i - 1]) == lower(b[j - 2]) && lower(a[i - 2]) == lower(b[j - 1])) {
        d[i][j] = std::min(d[i][j], d[i - 2][j - 2] + 1);
      }
    }
  }
  return d[n][m];
}

std::optional<std::string> closest_match(std::string_view word,
                                         std::span<const std::string_view> candidates) {
  return closest(word, candidates);
}
std::optional<std::string> closest_match(std::string_view word, std::span<const std::string> candidates) {
  return closest(word, candidates);
}
std::string did_you_mean(std::string_view word, std::span<const std::string_view> candidates) {
  return phrase(closest(word, candidates));
}
std::string did_you_mean(std::string_view word, std::span<const std::string> candidates) {
  return phrase(closest(word, candidates));
}

}  // namespace ratchet::config

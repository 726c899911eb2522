// "Did you mean" for misspelt names: the closest candidate by edit distance.
//
// Pure functions; safe from any thread.
#pragma once

#include <cstddef>
#include <optional>
#include <span>
#include <string>
#include <string_view>

namespace ratchet::config {

// Optimal string alignment distance (Levenshtein plus adjacent transposition).
std::size_t edit_distance(std::string_view a, std::string_view b);

// The candidate nearest to `word` if it is near enough to be a likely typo:
// at most 1 edit for words up to 4 letters, 2 up to 8, 3 beyond.
std::optional<std::string> closest_match(std::string_view word, std::span<const std::string_view> candidates);
std::optional<std::string> closest_match(std::string_view word, std::span<const std::string> candidates);

// " (did you mean \"x\"?)" or "" when nothing is close.
std::string did_you_mean(std::string_view word, std::span<const std::string_view> candidates);
std::string did_you_mean(std::string_view word, std::span<const std::string> candidates);

}  // namespace ratchet::config

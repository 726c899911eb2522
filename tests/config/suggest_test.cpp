#include "config/suggest.hpp"

#include <array>

#include <gtest/gtest.h>

namespace ratchet::config {
namespace {

constexpr std::array<std::string_view, 4> kWords = {"attempts", "backoff", "initial", "max"};

TEST(EditDistance_Pairs, CountsEditsAndTranspositions) {
  EXPECT_EQ(edit_distance("", ""), 0u);
  EXPECT_EQ(edit_distance("abc", ""), 3u);
  EXPECT_EQ(edit_distance("kitten", "sitting"), 3u);
  EXPECT_EQ(edit_distance("attemps", "attempts"), 1u);
  EXPECT_EQ(edit_distance("retyr", "retry"), 1u);
  EXPECT_EQ(edit_distance("Workers", "workers"), 0u);
}

TEST(ClosestMatch_NearMiss, SuggestsTheNearest) {
  EXPECT_EQ(closest_match("atempts", kWords), "attempts");
  EXPECT_EQ(closest_match("mx", kWords), "max");
  EXPECT_EQ(did_you_mean("backof", kWords), " (did you mean \"backoff\"?)");
}

TEST(ClosestMatch_FarOrExact, SuggestsNothing) {
  EXPECT_FALSE(closest_match("colour", kWords));
  EXPECT_FALSE(closest_match("zz", kWords));
  EXPECT_EQ(did_you_mean("completely_different", kWords), "");
}

}  // namespace
}  // namespace ratchet::config

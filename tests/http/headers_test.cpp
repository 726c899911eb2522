#include "http/headers.hpp"

#include <gtest/gtest.h>

namespace ratchet::http {
namespace {

TEST(Headers, Get_AnyCase_FindsField) {
  Headers h{{"X-RateLimit-Remaining", "3"}};
  EXPECT_EQ(h.get("x-ratelimit-remaining"), "3");
  EXPECT_EQ(h.get("X-RATELIMIT-REMAINING"), "3");
  EXPECT_FALSE(h.get("X-RateLimit-Reset").has_value());
}

TEST(Headers, RepeatedField_AllValuesKeptInOrder) {
  Headers h;
  h.add("RateLimit-Policy", "10;w=1");
  h.add("Content-Type", "application/json");
  h.add("ratelimit-policy", "1000;w=3600");
  EXPECT_EQ(h.get("RateLimit-Policy"), "10;w=1");
  EXPECT_EQ(h.get_all("RATELIMIT-POLICY"), (std::vector<std::string_view>{"10;w=1", "1000;w=3600"}));
  EXPECT_EQ(h.size(), 3u);
}

TEST(Headers, Iequals_DifferentLengthOrLetters_False) {
  EXPECT_TRUE(iequals("Retry-After", "retry-after"));
  EXPECT_FALSE(iequals("Retry-After", "Retry-Afte"));
  EXPECT_FALSE(iequals("Retry-After", "Retry_After"));
}

}  // namespace
}  // namespace ratchet::http

#include "ratchet/status.hpp"

#include <gtest/gtest.h>

namespace ratchet {
namespace {

Result<int> half(int x) {
  if (x % 2 != 0) return fail(Error::invalid_argument("x must be even, got " + std::to_string(x)));
  return x / 2;
}

TEST(Result_Value, CarriesTheValueOrTheError) {
  EXPECT_EQ(half(4).value(), 2);
  auto r = half(3);
  ASSERT_FALSE(r.has_value());
  EXPECT_EQ(r.error().code(), ErrorCode::kInvalidArgument);
  EXPECT_EQ(r.error().to_string(), "invalid_argument: x must be even, got 3");
}

TEST(Error_WithContext, KeepsTheCodeAndPrefixesTheMessage) {
  Error e = Error::database("disk I/O error").with_context("opening ratchet.db");
  EXPECT_EQ(e.code(), ErrorCode::kDatabase);
  EXPECT_EQ(e.message(), "opening ratchet.db: disk I/O error");
}

}  // namespace
}  // namespace ratchet

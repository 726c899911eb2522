#include "mock_portal/options.hpp"

#include <gtest/gtest.h>

namespace ratchet::mock_portal {
namespace {

using namespace std::chrono_literals;

TEST(MockOptions, ApplyJson_StarThenNamedPortal_NamedWins) {
  ServerOptions o;
  const auto doc = nlohmann::json::parse(R"({
    "seed": 9,
    "portals": {
      "imdb": {"dialect": "token_bucket", "limit": 3, "retry_after": "http_date"},
      "netflix": {"dialect": "retry_after_429", "window_offset": "120ms"},
      "*": {"dialect": "fixed_window", "limit": 10, "window": "200ms", "latency": "5ms", "date_skew": "-30s"}
    }})");
  ASSERT_TRUE(apply_json(o, doc));
  EXPECT_EQ(o.seed, 9u);
  EXPECT_EQ(o.portals.at("imdb").dialect, Dialect::kTokenBucket);
  EXPECT_EQ(o.portals.at("imdb").limit, 3);
  EXPECT_EQ(o.portals.at("imdb").window, 200ms);
  EXPECT_EQ(o.portals.at("imdb").retry_after_style, RetryAfterStyle::kHttpDate);
  EXPECT_EQ(o.portals.at("sify").dialect, Dialect::kFixedWindow);
  EXPECT_EQ(o.portals.at("sify").latency, 5ms);
  EXPECT_EQ(o.portals.at("sify").date_skew, -30s);
  EXPECT_EQ(o.portals.at("netflix").dialect, Dialect::kRetryAfter);
  EXPECT_EQ(o.portals.at("netflix").window_offset, 120ms);
}

TEST(MockOptions, ApplyPortalOption_BadValues_ErrorNamesKeyAndChoices) {
  PortalOptions p;
  auto bad_dialect = apply_portal_option(p, "dialect", "leaky");
  ASSERT_FALSE(bad_dialect);
  EXPECT_NE(bad_dialect.error().message().find("dialect=leaky"), std::string::npos);
  EXPECT_NE(bad_dialect.error().message().find("token_bucket"), std::string::npos);
  EXPECT_FALSE(apply_portal_option(p, "limit", "0"));
  EXPECT_FALSE(apply_portal_option(p, "window", "0s"));
  EXPECT_FALSE(apply_portal_option(p, "error_rate", "1.5"));
  auto unknown = apply_portal_option(p, "limt", "3");
  ASSERT_FALSE(unknown);
  EXPECT_NE(unknown.error().message().find("'limt'"), std::string::npos);
}

TEST(MockOptions, ApplyJson_UnknownPortal_Refused) {
  ServerOptions o;
  auto s = apply_json(o, nlohmann::json::parse(R"({"portals": {"hulu": {}}})"));
  ASSERT_FALSE(s);
  EXPECT_NE(s.error().message().find("hulu"), std::string::npos);
}

}  // namespace
}  // namespace ratchet::mock_portal

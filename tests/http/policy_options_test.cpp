#include "http/policy_options.hpp"

#include <gtest/gtest.h>

namespace ratchet::http {
namespace {

using namespace std::chrono_literals;

TEST(OptionsFromPolicy, DeclaredLimits_CarriedOverAndTlsVerified) {
  config::CallPolicy p;
  p.connect_timeout = 2500us;
  p.timeout = 3s;
  p.max_response_bytes = 1234;
  p.max_redirects = 2;
  const auto o = options_from_policy(p, "ratchet/0.1 imdb/1");
  EXPECT_EQ(o.connect_timeout, 3ms);
  EXPECT_EQ(o.timeout, 3000ms);
  EXPECT_EQ(o.max_response_bytes, 1234);
  EXPECT_EQ(o.max_redirects, 2);
  EXPECT_EQ(o.user_agent, "ratchet/0.1 imdb/1");
  EXPECT_TRUE(o.verify_tls);
  EXPECT_TRUE(Client::create(o));
}

TEST(OptionsFromPolicy, SubMillisecondTimeout_NeverZero) {
  config::CallPolicy p;
  p.timeout = 10us;
  EXPECT_EQ(options_from_policy(p, "x").timeout, 1ms);
}

}  // namespace
}  // namespace ratchet::http

#include "http/policy_options.hpp"

#include <algorithm>

namespace ratchet::http {
namespace {

std::chrono::milliseconds at_least_1ms(std::chrono::microseconds d) {
  return std::max(std::chrono::milliseconds(1), std::chrono::ceil<std::chrono::milliseconds>(d));
}

}  // namespace

ClientOptions options_from_policy(const config::CallPolicy& policy, std::string user_agent) {
  ClientOptions o;
  o.connect_timeout = at_least_1ms(policy.connect_timeout);
  o.timeout = at_least_1ms(policy.timeout);
  o.max_response_bytes = policy.max_response_bytes;
  o.max_redirects = policy.max_redirects;
  o.user_agent = std::move(user_agent);
  return o;
}

}  // namespace ratchet::http

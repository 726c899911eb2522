// The five movie portals: each reads its own JSON shape, maps HTTP statuses
// and transport failures to step statuses, and quotes a bad body.
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "plugin_fixture.hpp"

namespace ratchet::testing {
namespace {

using plugin_host::CallStatus;
using plugin_host::HttpFailure;
using ::testing::HasSubstr;
using namespace std::chrono_literals;

struct Portal {
  std::string name;
  std::string body;            // a valid reply rating the movie 8.5
  std::string without_number;  // the right shape with the rating as a string
  std::string pointer;         // where the number lives, as the error names it
};

void PrintTo(const Portal& p, std::ostream* os) { *os << p.name; }

const std::vector<Portal> kPortals = {
    {"imdb", R"({"title": "The Godfather", "rating": 8.5, "votes": 1234})",
     R"({"title": "The Godfather", "rating": "8.5"})", "/rating"},
    {"rotten_tomatoes", R"({"movie": "The Godfather", "scores": {"rating": 8.5, "audience": 0.91}})",
     R"({"movie": "The Godfather", "scores": {"audience": 0.91}})", "/scores/rating"},
    {"sify", R"({"result": {"name": "The Godfather", "rating": 8.5}})",
     R"({"result": {"name": "x", "rating": null}})", "/result/rating"},
    {"netflix", R"({"items": [{"title": "The Godfather", "rating": 8.5}, {"title": "x", "rating": 1}]})",
     R"({"items": []})", "/items/0/rating"},
    {"amazon_prime", R"({"product": {"title": "The Godfather", "rating": 8.5, "max": 5}})",
     R"({"product": {"title": "The Godfather", "max": 5}})", "/product/rating"},
};

class PortalTest : public ::testing::TestWithParam<Portal> {
 protected:
  const std::string base_ = "http://127.0.0.1:8080/" + GetParam().name;
  const std::string url_ = base_ + "/movies/The%20Godfather%3A%20Part%20II";
  const nlohmann::json args_ = {{"name", "The Godfather: Part II"}};
  nlohmann::json settings() const { return {{"base_url", base_}}; }

  Result<plugin_host::CallReply> get_rating() {
    return call_plugin(services_, GetParam().name, "get_rating", args_, settings());
  }
  plugin_host::CallReply expect_status(CallStatus status) {
    auto r = get_rating();
    EXPECT_TRUE(r.has_value()) << r.error().to_string();
    if (!r) return {};
    EXPECT_EQ(r->status, status) << r->message;
    return *r;
  }

  FakeHostServices services_;
};

TEST_P(PortalTest, ValidReply_ReturnsRatingFromUrlEncodedGet) {
  services_.respond_json(url_, GetParam().body);
  auto r = expect_status(CallStatus::kOk);
  EXPECT_EQ(r.output, (nlohmann::json{{"rating", 8.5}}));
  auto requests = services_.requests();
  ASSERT_EQ(requests.size(), 1u);
  EXPECT_EQ(requests[0].method, "GET");
  EXPECT_EQ(requests[0].url, url_);
}

TEST_P(PortalTest, BaseUrlWithTrailingSlash_NoDoubleSlash) {
  services_.respond_json(url_, GetParam().body);
  auto r = call_plugin(services_, GetParam().name, "get_rating", args_, {{"base_url", base_ + "/"}});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, CallStatus::kOk) << r->message;
}

TEST_P(PortalTest, MalformedBody_FatalQuotingBodyStart) {
  services_.respond_json(url_, "<html>Service Unavailable</html>");
  auto r = expect_status(CallStatus::kFatal);
  EXPECT_THAT(r.message, HasSubstr("malformed JSON"));
  EXPECT_THAT(r.message, HasSubstr("<html>Service Unavailable</html>"));
}

TEST_P(PortalTest, RatingMissingOrNotNumber_FatalNamingWhereAndQuotingBody) {
  services_.respond_json(url_, GetParam().without_number);
  auto r = expect_status(CallStatus::kFatal);
  EXPECT_THAT(r.message, HasSubstr("no number at " + GetParam().pointer));
  EXPECT_THAT(r.message, HasSubstr(GetParam().without_number.substr(0, 20)));
}

TEST_P(PortalTest, HugeBinaryBody_MessageBoundedAndPrintable) {
  std::string body(100000, '\x01');
  body.replace(0, 5, "oops!");
  services_.respond_json(url_, body);
  auto r = expect_status(CallStatus::kFatal);
  EXPECT_LT(r.message.size(), 600u);
  EXPECT_THAT(r.message, HasSubstr("oops!???"));
  for (char c : r.message) EXPECT_TRUE(c >= 0x20 && c < 0x7f) << "unprintable byte in message";
}

TEST_P(PortalTest, Http429WithRetryAfter_ThrottledPassingRetryAfter) {
  plugin_host::HttpResult res;
  res.status = 429;
  res.retry_after = 1500ms;
  services_.respond(url_, res);
  auto r = expect_status(CallStatus::kThrottled);
  EXPECT_EQ(r.retry_after, 1500ms);
  EXPECT_THAT(r.message, HasSubstr("HTTP 429"));
}

TEST_P(PortalTest, Http429WithoutRetryAfter_ThrottledWithoutWait) {
  services_.respond_json(url_, "slow down", 429);
  auto r = expect_status(CallStatus::kThrottled);
  EXPECT_FALSE(r.retry_after.has_value());
}

TEST_P(PortalTest, Http5xx_Retryable) {
  services_.respond_json(url_, "boom", 503);
  auto r = expect_status(CallStatus::kRetryable);
  EXPECT_THAT(r.message, HasSubstr("HTTP 503"));
  services_.respond_json(url_, "boom", 500);
  expect_status(CallStatus::kRetryable);
}

TEST_P(PortalTest, OtherNon2xx_FatalWithStatusAndBody) {
  services_.respond_json(url_, R"({"error": "unknown movie"})", 404);
  auto r = expect_status(CallStatus::kFatal);
  EXPECT_THAT(r.message, HasSubstr("HTTP 404"));
  EXPECT_THAT(r.message, HasSubstr("unknown movie"));
  services_.respond_json(url_, "", 401);
  expect_status(CallStatus::kFatal);
}

TEST_P(PortalTest, TransportFailures_MappedToStatuses) {
  auto refused = transport_failure(HttpFailure::kRefused, "rate limit");
  refused.retry_after = 250ms;
  services_.respond(url_, refused);
  EXPECT_EQ(expect_status(CallStatus::kThrottled).retry_after, 250ms);
  services_.respond(url_, transport_failure(HttpFailure::kTimeout, "after 10s"));
  expect_status(CallStatus::kRetryable);
  services_.respond(url_, transport_failure(HttpFailure::kConnect, "connection refused"));
  expect_status(CallStatus::kRetryable);
  services_.respond(url_, transport_failure(HttpFailure::kTls, "certificate expired"));
  EXPECT_THAT(expect_status(CallStatus::kFatal).message, HasSubstr("certificate expired"));
  services_.respond(url_, transport_failure(HttpFailure::kTooLarge, "over 8MiB"));
  expect_status(CallStatus::kFatal);
}

TEST_P(PortalTest, NoBaseUrlSetting_FatalNamingSetting) {
  auto r = call_plugin(services_, GetParam().name, "get_rating", args_, nullptr);
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, CallStatus::kFatal);
  EXPECT_THAT(r->message, HasSubstr("setting 'base_url'"));
  EXPECT_TRUE(services_.requests().empty());
}

TEST_P(PortalTest, NameArgumentMissing_FatalNamingArgument) {
  auto r = call_plugin(services_, GetParam().name, "get_rating", {{"title", "x"}}, settings());
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, CallStatus::kFatal);
  EXPECT_THAT(r->message, HasSubstr("argument 'name'"));
}

INSTANTIATE_TEST_SUITE_P(FivePortals, PortalTest, ::testing::ValuesIn(kPortals),
                         [](const auto& param_info) { return param_info.param.name; });

TEST(PortalPlugins, AllSixBuilt_LoadWithoutFailures) {
  auto& host = built_plugins();
  for (const char* name : {"imdb", "rotten_tomatoes", "sify", "netflix", "amazon_prime", "http_json"})
    EXPECT_TRUE(host.find(name).has_value()) << name;
  for (const auto& f : host.failures()) ADD_FAILURE() << f.to_string();
}

}  // namespace
}  // namespace ratchet::testing

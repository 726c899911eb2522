// http_json: a portal configured only in TOML settings.
#include <string>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "plugin_fixture.hpp"

namespace ratchet::testing {
namespace {

using nlohmann::json;
using plugin_host::CallStatus;
using ::testing::HasSubstr;

class HttpJsonTest : public ::testing::Test {
 protected:
  Result<plugin_host::CallReply> request(const json& args, const json& settings) {
    return call_plugin(services_, "http_json", "request", args, settings);
  }
  FakeHostServices services_;
};

TEST_F(HttpJsonTest, UrlTemplateAndExtract_GetsEncodedUrlAndReturnsValue) {
  services_.respond_json("http://api.test/v1/find?q=Am%C3%A9lie%20%26%20co",
                         R"({"data": {"score": 7.9, "title": "Amélie"}})");
  auto r = request(
      {{"name", "Amélie & co"}},
      {{"url", "http://api.test/v1/find?q={{args.name}}"}, {"extract", "/data/score"}, {"output", "rating"}});
  ASSERT_TRUE(r.has_value()) << r.error().to_string();
  ASSERT_EQ(r->status, CallStatus::kOk) << r->message;
  EXPECT_EQ(r->output, (json{{"rating", 7.9}}));
  EXPECT_EQ(services_.requests().at(0).method, "GET");
}

TEST_F(HttpJsonTest, NoExtract_WholeReplyUnderValue) {
  services_.respond_json("http://api.test/x", R"([1, 2])");
  auto r = request({}, {{"url", "http://api.test/x"}});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->output, (json{{"value", {1, 2}}}));
}

TEST_F(HttpJsonTest, HeadersAndJsonBodyTemplate_SentWithArgumentsFilledIn) {
  services_.respond_json("http://api.test/graphql", R"({"ok": true})");
  auto r = request({{"name", "Up"}, {"year", 2009}},
                   {{"url", "http://api.test/graphql"},
                    {"method", "POST"},
                    {"headers", {{"Authorization", "Bearer resolved-secret"}, {"X-Movie", "{{args.name}}"}}},
                    {"body", {{"query", "movie {{args.name}}"}, {"year", "{{args.year}}"}}},
                    {"extract", "/ok"}});
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->status, CallStatus::kOk) << r->message;
  auto sent = services_.requests().at(0);
  EXPECT_EQ(sent.method, "POST");
  EXPECT_EQ(json::parse(sent.body),
            (json{{"query", "movie Up"}, {"year", 2009}}));  // the number stays a number
  EXPECT_THAT(sent.headers, ::testing::Contains(std::pair<std::string, std::string>(
                                "Authorization", "Bearer resolved-secret")));
  EXPECT_THAT(sent.headers, ::testing::Contains(std::pair<std::string, std::string>("X-Movie", "Up")));
  EXPECT_THAT(sent.headers,
              ::testing::Contains(std::pair<std::string, std::string>("Content-Type", "application/json")));
}

// http_json estimates a request from its `estimate` setting before the call
// is admitted; a setting it cannot read is no estimate (the call itself
// then fails naming it).
TEST_F(HttpJsonTest, Estimate_IsTheSettingFilledFromTheArguments) {
  auto* host = &built_plugins();
  const nlohmann::json settings = {{"url", "http://portal/{{args.name}}"}, {"estimate", "{{args.points}}"}};
  EXPECT_EQ(host->estimate("http_json", "request", {{"name", "Up"}, {"points", 5}}, settings), 5);
  EXPECT_EQ(host->estimate("http_json", "request", {{"name", "Up"}, {"points", "5"}}, settings), 5);
  EXPECT_EQ(host->estimate("http_json", "request", {{"name", "Up"}}, settings), 0);
  EXPECT_EQ(host->estimate("http_json", "request", {{"name", "Up"}, {"points", "lots"}}, settings), 0);
  EXPECT_EQ(host->estimate("http_json", "request", {{"name", "Up"}, {"points", 5}}, {{"url", "x"}}), 0);
  EXPECT_EQ(host->estimate("http_json", "no_such_operation", {}, settings), 0);
  EXPECT_EQ(host->estimate("no_such_plugin", "request", {}, settings), 0);
}

TEST_F(HttpJsonTest, PlaceholderWithoutArgument_FatalNamingArgumentAndSetting) {
  auto r = request({}, {{"url", "http://api.test/{{args.name}}"}});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, CallStatus::kFatal);
  EXPECT_THAT(r->message, HasSubstr("setting 'url' uses {{args.name}} but the call has no argument 'name'"));
  EXPECT_TRUE(services_.requests().empty());
}

TEST_F(HttpJsonTest, ExtractPathAbsent_FatalQuotingBody) {
  services_.respond_json("http://api.test/x", R"({"data": {}})");
  auto r = request({}, {{"url", "http://api.test/x"}, {"extract", "/data/score"}});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, CallStatus::kFatal);
  EXPECT_THAT(r->message, HasSubstr("nothing at /data/score"));
  EXPECT_THAT(r->message, HasSubstr(R"({"data": {}})"));
}

TEST_F(HttpJsonTest, BadSettings_FatalNamingSetting) {
  auto no_url = request({}, json::object());
  ASSERT_TRUE(no_url.has_value());
  EXPECT_THAT(no_url->message, HasSubstr("setting 'url'"));
  services_.respond_json("http://api.test/x", "{}");
  auto bad_pointer = request({}, {{"url", "http://api.test/x"}, {"extract", "data.score"}});
  ASSERT_TRUE(bad_pointer.has_value());
  EXPECT_EQ(bad_pointer->status, CallStatus::kFatal);
  EXPECT_THAT(bad_pointer->message, HasSubstr("setting 'extract' is not a JSON pointer"));
}

TEST_F(HttpJsonTest, StatusMapping_SameAsPortals) {
  services_.respond_json("http://api.test/x", "busy", 429);
  EXPECT_EQ(request({}, {{"url", "http://api.test/x"}})->status, CallStatus::kThrottled);
  services_.respond_json("http://api.test/x", "down", 502);
  EXPECT_EQ(request({}, {{"url", "http://api.test/x"}})->status, CallStatus::kRetryable);
  services_.respond_json("http://api.test/x", "nope", 403);
  EXPECT_EQ(request({}, {{"url", "http://api.test/x"}})->status, CallStatus::kFatal);
}

// A GraphQL portal reports what each query cost; the plugin passes it on
// through the ABI so the engine can correct its limits.
TEST_F(HttpJsonTest, CostPointer_ReportsTheReplysCostToTheEngine) {
  services_.respond_json("http://api.test/graphql", R"({"data": {"x": 1}, "extensions": {"cost": 17}})");
  auto r = request(
      {}, {{"url", "http://api.test/graphql"}, {"extract", "/data/x"}, {"cost_pointer", "/extensions/cost"}});
  ASSERT_TRUE(r.has_value());
  ASSERT_EQ(r->status, CallStatus::kOk) << r->message;
  EXPECT_EQ(services_.costs(), (std::vector<std::int64_t>{17}));
}

TEST_F(HttpJsonTest, CostHeader_ReportsTheCostEvenOfARefusedCall) {
  HttpResult refused;
  refused.status = 429;
  refused.headers = {{"x-query-cost", "3"}};
  services_.respond("http://api.test/x", refused);
  auto r = request({}, {{"url", "http://api.test/x"}, {"cost_header", "X-Query-Cost"}});
  ASSERT_TRUE(r.has_value());
  EXPECT_EQ(r->status, CallStatus::kThrottled);
  EXPECT_EQ(services_.costs(), (std::vector<std::int64_t>{3}));
}

// A hostile or broken reply's cost is not believed: the call still succeeds
// at its estimate, with a warning that quotes the value.
TEST_F(HttpJsonTest, CostThatIsNotAWholeNumberInRange_IgnoredWithAWarning) {
  for (const std::string cost :
       {R"("-4")", R"("1e99")", "-1", "18446744073709551615", "2.5", R"({"a": 1})"}) {
    SCOPED_TRACE(cost);
    FakeHostServices services;
    services.respond_json("http://api.test/x", R"({"cost": )" + cost + "}");
    auto r = call_plugin(services, "http_json", "request", json::object(),
                         {{"url", "http://api.test/x"}, {"cost_pointer", "/cost"}});
    ASSERT_TRUE(r.has_value());
    EXPECT_EQ(r->status, CallStatus::kOk) << r->message;
    EXPECT_TRUE(services.costs().empty());
    ASSERT_FALSE(services.logs().empty());
    EXPECT_THAT(services.logs().back(), HasSubstr("is not a whole number from 0 to 1e9"));
  }
}

}  // namespace
}  // namespace ratchet::testing

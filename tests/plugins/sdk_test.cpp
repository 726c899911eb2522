// The C++ SDK on its own, without loading a library: exceptions become
// statuses, output goes through host->alloc, helpers encode and quote.
#include "ratchet/plugin.hpp"

#include <cstring>
#include <memory>
#include <string>
#include <vector>

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace {

namespace rp = ratchet::plugin;
using nlohmann::json;
using ::testing::HasSubstr;

// A minimal C host table backed by this struct.
struct TableHost {
  std::vector<std::unique_ptr<char[]>> buffers;
  bool refuse_alloc = false;
  ratchet_host_services table{};
  ratchet_call_context context{};
  ratchet_reply reply{};

  TableHost() {
    table.struct_size = sizeof(table);
    table.host_data = this;
    table.alloc = [](void* self, size_t n) -> char* {
      auto* h = static_cast<TableHost*>(self);
      if (h->refuse_alloc) return nullptr;
      h->buffers.push_back(std::make_unique<char[]>(n + 1));
      return h->buffers.back().get();
    };
    table.http_request = [](void*, const ratchet_http_request*, ratchet_http_response* r) -> int32_t {
      r->transport_error = RATCHET_HTTP_TIMEOUT;
      return r->transport_error;
    };
    table.log = [](void*, int32_t, ratchet_str) {};
    table.is_cancelled = [](void*) -> int32_t { return 0; };
    context.struct_size = sizeof(context);
    reply.struct_size = sizeof(reply);
    reply.retry_after_ms = RATCHET_NO_RETRY_AFTER;
  }

  template <rp::Operation F>
  void run(std::string_view args = "{}") {
    rp::detail::trampoline<F>(&table, &context, {args.data(), args.size()}, {"{}", 2}, &reply);
  }
  std::string output() const { return reply.output ? std::string(reply.output, reply.output_size) : ""; }
};

json ok_op(rp::Context&, const json& args) { return {{"got", args}}; }
json throttled_op(rp::Context&, const json&) {
  throw rp::Throttled("slow down", std::chrono::milliseconds(750));
}
json retryable_op(rp::Context&, const json&) { throw rp::Retryable("try later"); }
json std_op(rp::Context&, const json&) { throw std::out_of_range("vector index"); }
json weird_op(rp::Context&, const json&) { throw 42; }
json http_op(rp::Context& ctx, const json&) { return {{"status", ctx.http().get("http://x").status}}; }
json http_query_op(rp::Context& ctx, const json&) {
  return {{"status", ctx.http().get("http://x/m?api_key=KEY-secret").status}};
}

TEST(PluginSdk, ReturnedJson_OkWithOutputInHostBuffer) {
  TableHost h;
  h.run<&ok_op>(R"({"a": 1})");
  EXPECT_EQ(h.reply.status, RATCHET_STATUS_OK);
  EXPECT_EQ(json::parse(h.output()), (json{{"got", {{"a", 1}}}}));
  EXPECT_EQ(h.reply.output, h.buffers.back().get());
}

TEST(PluginSdk, ThrownStatuses_BecomeReplyStatuses) {
  TableHost t;
  t.run<&throttled_op>();
  EXPECT_EQ(t.reply.status, RATCHET_STATUS_THROTTLED);
  EXPECT_EQ(t.reply.retry_after_ms, 750);
  EXPECT_EQ(t.output(), "slow down");
  TableHost r;
  r.run<&retryable_op>();
  EXPECT_EQ(r.reply.status, RATCHET_STATUS_RETRYABLE);
  TableHost s;
  s.run<&std_op>();
  EXPECT_EQ(s.reply.status, RATCHET_STATUS_FATAL);
  EXPECT_EQ(s.output(), "vector index");
  TableHost w;
  w.run<&weird_op>();
  EXPECT_EQ(w.reply.status, RATCHET_STATUS_FATAL);
  EXPECT_EQ(w.output(), "unknown exception in plugin operation");
}

TEST(PluginSdk, ArgsNotJson_Fatal) {
  TableHost h;
  h.run<&ok_op>("{nope");
  EXPECT_EQ(h.reply.status, RATCHET_STATUS_FATAL);
  EXPECT_THAT(h.output(), HasSubstr("arguments are not valid JSON"));
}

TEST(PluginSdk, HostRefusesOutputBuffer_FatalWithoutOutput) {
  TableHost h;
  h.refuse_alloc = true;
  h.run<&ok_op>();
  EXPECT_EQ(h.reply.output, nullptr);
  EXPECT_EQ(h.reply.output_size, 0u);
}

TEST(PluginSdk, TransportTimeout_Retryable) {
  TableHost h;
  h.run<&http_op>();
  EXPECT_EQ(h.reply.status, RATCHET_STATUS_RETRYABLE);
  EXPECT_THAT(h.output(), HasSubstr("GET http://x timed out"));
}

TEST(PluginSdk, UrlEncode_OnlyUnreservedLeftAlone) {
  EXPECT_EQ(rp::url_encode("The Godfather: Part II"), "The%20Godfather%3A%20Part%20II");
  EXPECT_EQ(rp::url_encode("a-b_c.d~e/f?g=h&i"), "a-b_c.d~e%2Ff%3Fg%3Dh%26i");
  EXPECT_EQ(rp::url_encode("é"), "%C3%A9");
}

TEST(PluginSdk, PrintablePrefix_BoundedAndPrintable) {
  EXPECT_EQ(rp::printable_prefix("ab\ncd", 10), "ab?cd");
  EXPECT_EQ(rp::printable_prefix(std::string(300, 'x'), 4), "xxxx...");
}

TEST(PluginSdk, RaiseForStatus_MapsStatuses) {
  rp::Response r;
  r.url = "http://x";
  r.status = 204;
  EXPECT_NO_THROW(r.raise_for_status());
  r.status = 429;
  r.retry_after = std::chrono::seconds(2);
  try {
    r.raise_for_status();
    ADD_FAILURE() << "429 did not throw";
  } catch (const rp::Throttled& e) {
    EXPECT_EQ(e.retry_after(), std::chrono::seconds(2));
  }
  r.status = 599;
  EXPECT_THROW(r.raise_for_status(), rp::Retryable);
  r.status = 302;
  EXPECT_THROW(r.raise_for_status(), rp::Fatal);
}

// Keys travel in query strings and user info; the SDK's messages leave both out.
TEST(PluginSdk, ErrorMessages_QuoteUrlsWithoutQueryOrUserInfo) {
  rp::Response r;
  r.url = "https://user:pw-secret@api.test/v1/movies/Heat?api_key=KEY-secret&x=1#frag";
  r.body = "{\"error\": \"nope\"}";
  for (int status : {404, 500, 429}) {
    r.status = status;
    try {
      r.raise_for_status();
      ADD_FAILURE() << status << " did not throw";
    } catch (const std::exception& e) {
      EXPECT_THAT(e.what(), HasSubstr("from https://api.test/v1/movies/Heat:"));
      EXPECT_THAT(e.what(), ::testing::Not(HasSubstr("secret"))) << e.what();
    }
  }
  r.status = 200;
  r.body = "not json";
  try {
    (void)r.json();
    ADD_FAILURE() << "malformed JSON did not throw";
  } catch (const rp::Fatal& e) {
    EXPECT_THAT(e.what(), ::testing::Not(HasSubstr("secret"))) << e.what();
  }
  // The parser ends the text at a NUL byte: a reply with junk after one
  // was taken as the JSON before it.
  r.body = std::string("{\"rating\": 1}\0garbage", 21);
  EXPECT_THROW((void)r.json(), rp::Fatal);
  r.body = "{\"rating\": 1}";
  EXPECT_EQ(r.json()["rating"], 1);
  EXPECT_EQ(rp::redact_url("http://h:8080/p?q#f"), "http://h:8080/p");
  EXPECT_EQ(rp::redact_url("no url?key=1"), "no url");
}

TEST(PluginSdk, TransportFailure_MessageQuotesUrlWithoutQuery) {
  TableHost h;
  h.run<&http_query_op>();
  EXPECT_EQ(h.reply.status, RATCHET_STATUS_RETRYABLE);
  EXPECT_THAT(h.output(), HasSubstr("GET http://x/m timed out"));
  EXPECT_THAT(h.output(), ::testing::Not(HasSubstr("KEY-secret")));
}

TEST(PluginSdk, ResponseHeader_CaseInsensitive) {
  rp::Response r;
  r.headers = {{"Retry-After", "5"}};
  EXPECT_EQ(r.header("retry-after"), "5");
  EXPECT_EQ(r.header("x-none"), std::nullopt);
}

}  // namespace

// Secrets are masked in every form they take inside longer text.
#include "common/secret_mask.hpp"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "encodings.hpp"

namespace ratchet::common {
namespace {

const std::string kKey = "k3y/Se+cr=t 42";

using ratchet::testing::base64;

std::string percent(const std::string& s, bool lower) {
  const char* hex = lower ? "0123456789abcdef" : "0123456789ABCDEF";
  std::string out;
  for (char c : s) {
    auto u = static_cast<unsigned char>(c);
    if (std::isalnum(u)) {
      out += c;
    } else {
      out += '%';
      out += hex[u >> 4];
      out += hex[u & 15];
    }
  }
  return out;
}

TEST(SecretMask, RawInsideALongerString_IsMasked) {
  EXPECT_EQ(mask_secrets("GET http://h/m?api_key=" + kKey + "&x=1 failed", {kKey}),
            "GET http://h/m?api_key=***&x=1 failed");
}

TEST(SecretMask, EveryOccurrence_IsMasked) {
  EXPECT_EQ(mask_secrets(kKey + "," + kKey + kKey, {kKey}), "***,***");
}

TEST(SecretMask, PercentEncodedInUpperOrLowerCaseHex_IsMasked) {
  for (bool lower : {false, true}) {
    const std::string text = "url http://h/?k=" + percent(kKey, lower) + "&n=Heat";
    EXPECT_EQ(mask_secrets(text, {kKey}), "url http://h/?k=***&n=Heat") << text;
  }
}

TEST(SecretMask, PartlyPercentEncodedAndPlusForSpace_IsMasked) {
  // As a form encoder writes it: only some bytes encoded, '+' for the space.
  EXPECT_EQ(mask_secrets("k=k3y%2FSe%2bcr%3Dt+42&z", {kKey}), "k=***&z");
  EXPECT_EQ(mask_secrets("k=k3y%252FSe%252Bcr%253Dt%252042", {kKey}), "k=***") << "encoded twice";
}

TEST(SecretMask, JsonEscaped_IsMasked) {
  const std::string secret = "pa\"ss\\wo/rd";
  nlohmann::json j = {{"url", "http://h/?k=" + secret}};
  EXPECT_EQ(mask_secrets(j.dump(), {secret}), R"({"url":"http://h/?k=***"})");
  EXPECT_EQ(mask_secrets(R"({"k":"pa\u0022ss\\wo\/rd"})", {secret}), R"({"k":"***"})");
}

// A server's error page echoes what it was sent, HTML-escaped.
TEST(SecretMask, HtmlEscaped_IsMasked) {
  const std::string secret = "k&y<\"z'9>";
  EXPECT_EQ(mask_secrets("<p>bad key k&amp;y&lt;&quot;z&#39;9&gt;</p>", {secret}), "<p>bad key ***</p>");
  EXPECT_EQ(mask_secrets("<p>k&#38;y&#x3C;&#X0022;z&apos;9&#062;</p>", {secret}), "<p>***</p>");
  // Every byte as a numeric reference, as some escapers write it.
  std::string all;
  for (char c : kKey) all += "&#" + std::to_string(static_cast<int>(c)) + ";";
  EXPECT_EQ(mask_secrets("<b>" + all + "</b>", {kKey}), "<b>***</b>");
  EXPECT_EQ(mask_secrets("a &amp; b &#38; c", {secret}), "a &amp; b &#38; c") << "no secret: unchanged";
}

TEST(SecretMask, HexInLowerOrUpperCase_IsMasked) {
  EXPECT_EQ(mask_secrets("token=6b33792f53652b63723d74203432;", {kKey}), "token=***;");
  EXPECT_EQ(mask_secrets("token=6B33792F53652B63723D74203432;", {kKey}), "token=***;");
}

TEST(SecretMask, Base64AtEveryAlignment_MasksTheWholeRun) {
  for (const std::string prefix : {"", "u:", "us:", "use:", "user:"}) {
    const std::string encoded = base64(prefix + kKey + (prefix.size() % 2 ? "!" : ""));
    const std::string text = "Authorization: Basic " + encoded + " sent";
    EXPECT_EQ(mask_secrets(text, {kKey}), "Authorization: Basic *** sent") << text;
  }
}

TEST(SecretMask, Base64UrlAlphabet_IsMasked) {
  const std::string secret = "ab>>>?\?\?>>>cd";  // its base64 holds '+' and '/'
  std::string encoded = base64("user:" + secret + "xy");
  for (auto& c : encoded) c = c == '+' ? '-' : c == '/' ? '_' : c;
  ASSERT_NE(encoded.find_first_of("-_"), std::string::npos) << encoded;
  EXPECT_EQ(mask_secrets("t=" + encoded + "&x", {secret}), "t=***&x");
}

TEST(SecretMask, UnprintableBytesShownAsQuestionMarks_AreMasked) {
  const std::string secret =
      "key\x01\xff"
      "tail";
  EXPECT_EQ(mask_secrets("body: key??tail...", {secret}), "body: ***...");
}

TEST(SecretMask, ShortSecrets_AreLeftAlone) {
  EXPECT_EQ(mask_secrets("abc abc", {"abc", ""}), "abc abc");
  EXPECT_EQ(mask_secrets("abcd", {"abcd"}), "***");
}

TEST(SecretMask, OverlappingSecrets_MaskTheirUnion) {
  EXPECT_EQ(mask_secrets("xxABCDEFGHyy", {"ABCDEF", "DEFGH"}), "xx***yy");
}

TEST(SecretMask, TextWithoutSecrets_IsUnchanged) {
  const std::string text = "HTTP 404 from http://h/movies/Heat: {\"error\": \"not found\"} %41 \\u0041 +";
  EXPECT_EQ(mask_secrets(text, {kKey}), text);
  EXPECT_FALSE(SecretMask({kKey}).holds_secret(text));
  EXPECT_TRUE(SecretMask({kKey}).holds_secret("Bearer " + kKey));
}

TEST(SecretMask, Json_EveryStringAndKeyMaskedAndStillJson) {
  SecretMask mask({kKey});
  nlohmann::json in = {{"url", "http://h/?k=" + kKey}, {kKey, 1}, {"list", {kKey, 2}}, {"n", 7}};
  nlohmann::json out = mask.mask_json(in);
  EXPECT_EQ(out, (nlohmann::json{{"url", "http://h/?k=***"}, {"***", 1}, {"list", {"***", 2}}, {"n", 7}}));
}

}  // namespace
}  // namespace ratchet::common

// What a log line or an error may show of a database URL: never the password.
#include <gtest/gtest.h>

#include "store/postgres/connection.hpp"
#include "store/postgres/url.hpp"

namespace ratchet::store::pg {
namespace {

TEST(PgUrl, MasksThePasswordOfTheUserInfo) {
  EXPECT_EQ(mask_url("postgresql://user:s3cret@db.example:5432/jobs"),
            "postgresql://user:***@db.example:5432/jobs");
  EXPECT_EQ(mask_url("postgres://user:s3cret@host/db"), "postgres://user:***@host/db");
}

TEST(PgUrl, KeepsAUrlWithoutPassword) {
  EXPECT_EQ(mask_url("postgresql://ratchet@127.0.0.1:5432/ratchet"),
            "postgresql://ratchet@127.0.0.1:5432/ratchet");
  EXPECT_EQ(mask_url("postgresql://host/db?sslmode=require"), "postgresql://host/db?sslmode=require");
}

TEST(PgUrl, HidesAPasswordHoldingSeparators) {
  const std::string masked = mask_url("postgresql://user:pa@ss:w?rd@host:5432/db");
  EXPECT_EQ(masked, "postgresql://user:***@host:5432/db");
  EXPECT_EQ(masked.find("rd"), std::string::npos);
}

TEST(PgUrl, MasksAPasswordQueryParameter) {
  EXPECT_EQ(mask_url("postgresql://user@host/db?sslmode=require&password=s3cret&connect_timeout=3"),
            "postgresql://user@host/db?sslmode=require&password=***&connect_timeout=3");
  EXPECT_EQ(mask_url("postgresql://u:a@h/db?password=b"), "postgresql://u:***@h/db?password=***");
}

TEST(PgUrl, MasksKeywordValueStrings) {
  EXPECT_EQ(mask_url("host=h password=s3cret dbname=d"), "host=h password=*** dbname=d");
  EXPECT_EQ(mask_url("host=h password = 'with \\' quote and space' user=u"), "host=h password=*** user=u");
}

TEST(PgUrl, ScrubReplacesEveryOccurrence) {
  EXPECT_EQ(scrub("pw s3cret and s3cret", "s3cret"), "pw *** and ***");
  EXPECT_EQ(scrub("nothing here", ""), "nothing here");
}

// A URL libpq cannot parse is quoted back in its message, and libpq then
// knows no password to hide: an unclosed IPv6 bracket or a bad % escape
// printed the password of a URL from ${NAME} in clear.
TEST(PgUrl, AMalformedUrlsPasswordIsNotInTheConnectError) {
  const std::pair<std::string, std::string> cases[] = {
      {"postgresql://ratchet:Sup3rS3cretXYZ@[::1/ratchet", "Sup3rS3cretXYZ"},
      {"postgresql://ratchet:%zzSup3rS3cretXYZ@127.0.0.1:1/ratchet", "Sup3rS3cretXYZ"},
      {"postgresql://ratchet:Sup3r%40S3cret@[::1/ratchet", "S3cret"},
  };
  for (const auto& [url, secret] : cases) {
    ConnectOptions options;
    options.url = url;
    options.connect_timeout = std::chrono::seconds(1);
    auto c = connect(options);
    ASSERT_FALSE(c.has_value()) << url;
    const std::string message = c.error().error().message();
    EXPECT_EQ(message.find(secret), std::string::npos) << message;
    EXPECT_NE(message.find("***"), std::string::npos) << message;
  }
  EXPECT_EQ(scrub_url_password("said: Sup3r@S3cret", "postgresql://u:Sup3r%40S3cret@h/d"), "said: ***");
  EXPECT_EQ(scrub_url_password("said: s3 cr3t", "host=h password='s3 cr3t'"), "said: ***");
}

}  // namespace
}  // namespace ratchet::store::pg

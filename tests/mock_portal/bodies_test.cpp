#include "mock_portal/bodies.hpp"

#include <gtest/gtest.h>

#include "mock_portal/http_date.hpp"

namespace ratchet::mock_portal {
namespace {

using json = nlohmann::json;

TEST(Bodies, EachPortal_DocumentedShapeWithExpectedRating) {
  const std::string m = "The Godfather";
  const auto imdb = json::parse(movie_body("imdb", m, MalformedBody::kNone));
  EXPECT_EQ(imdb.at("title"), m);
  EXPECT_EQ(imdb.at("rating").get<double>(), expected_rating("imdb", m));
  EXPECT_TRUE(imdb.at("votes").is_number_integer());

  const auto rt = json::parse(movie_body("rotten_tomatoes", m, MalformedBody::kNone));
  EXPECT_EQ(rt.at("movie"), m);
  EXPECT_EQ(rt.at("scores").at("rating").get<double>(), expected_rating("rotten_tomatoes", m));
  const double audience = rt.at("scores").at("audience").get<double>();
  EXPECT_GE(audience, 0.0);
  EXPECT_LE(audience, 1.0);

  const auto sify = json::parse(movie_body("sify", m, MalformedBody::kNone));
  EXPECT_EQ(sify.at("result").at("name"), m);
  EXPECT_EQ(sify.at("result").at("rating").get<double>(), expected_rating("sify", m));

  const auto netflix = json::parse(movie_body("netflix", m, MalformedBody::kNone));
  EXPECT_EQ(netflix.at("items").at(0).at("title"), m);
  EXPECT_EQ(netflix.at("items").at(0).at("rating").get<double>(), expected_rating("netflix", m));

  const auto prime = json::parse(movie_body("amazon_prime", m, MalformedBody::kNone));
  EXPECT_EQ(prime.at("product").at("title"), m);
  EXPECT_EQ(prime.at("product").at("rating").get<double>(), expected_rating("amazon_prime", m));
  EXPECT_EQ(prime.at("product").at("max"), 5);
}

TEST(Bodies, Ratings_DeterministicAndInScale) {
  for (const std::string m : {"Up", "Heat", "Alien", "Amélie", "", "a/b c"}) {
    for (const auto& portal : portal_names()) {
      const double r = expected_rating(portal, m);
      EXPECT_EQ(r, expected_rating(portal, m));
      const double max = (portal == "netflix" || portal == "amazon_prime") ? 5.0 : 10.0;
      EXPECT_GE(r, portal == "rotten_tomatoes" ? 0.0 : 1.0) << portal << " " << m;
      EXPECT_LE(r, max) << portal << " " << m;
      EXPECT_DOUBLE_EQ(r * 10, std::round(r * 10)) << "one decimal";
    }
  }
  EXPECT_NE(expected_rating("imdb", "Up"), expected_rating("imdb", "Heat"));
}

TEST(Bodies, Malformed_TruncatedHtmlNoRating) {
  EXPECT_TRUE(
      json::parse(movie_body("imdb", "Up", MalformedBody::kTruncated), nullptr, false).is_discarded());
  EXPECT_TRUE(json::parse(movie_body("imdb", "Up", MalformedBody::kHtml), nullptr, false).is_discarded());
  const auto no_rating = json::parse(movie_body("netflix", "Up", MalformedBody::kNoRating));
  EXPECT_EQ(no_rating.at("items").at(0).at("title"), "Up");
  EXPECT_FALSE(no_rating.at("items").at(0).contains("rating"));
}

TEST(HttpDate, KnownInstant_ImfFixdate) {
  EXPECT_EQ(format_http_date(TimePoint(std::chrono::seconds(784111777))), "Sun, 06 Nov 1994 08:49:37 GMT");
  EXPECT_EQ(format_http_date(TimePoint(std::chrono::seconds(0))), "Thu, 01 Jan 1970 00:00:00 GMT");
}

}  // namespace
}  // namespace ratchet::mock_portal

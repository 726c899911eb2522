#include "http/url.hpp"

#include <gtest/gtest.h>

namespace ratchet::http {
namespace {

TEST(EncodePathSegment, UnreservedCharacters_KeptAsIs) {
  EXPECT_EQ(encode_path_segment("Up-2009_v1.0~x"), "Up-2009_v1.0~x");
}

TEST(EncodePathSegment, SpacesSlashesAndUtf8_PercentEncoded) {
  EXPECT_EQ(encode_path_segment("The Dark Knight"), "The%20Dark%20Knight");
  EXPECT_EQ(encode_path_segment("AC/DC?&=#%+"), "AC%2FDC%3F%26%3D%23%25%2B");
  EXPECT_EQ(encode_path_segment("Amélie"), "Am%C3%A9lie");
  EXPECT_EQ(encode_path_segment(""), "");
}

TEST(RedactUrl, QueryFragmentAndUserInfo_Removed) {
  EXPECT_EQ(redact_url("https://user:pw@api.example.com:8443/v1/movies/Up?api_key=s3cret#frag"),
            "https://api.example.com:8443/v1/movies/Up");
  EXPECT_EQ(redact_url("http://127.0.0.1:8080/imdb?token=abc"), "http://127.0.0.1:8080/imdb");
  EXPECT_EQ(redact_url("http://host?key=x"), "http://host");
}

TEST(RedactUrl, NotAbsolute_KeepsTextBeforeQuery) {
  EXPECT_EQ(redact_url("not a url?key=secret"), "not a url");
}

}  // namespace
}  // namespace ratchet::http

#include "mock_portal/bodies.hpp"

#include <cstdint>

namespace ratchet::mock_portal {
namespace {

std::uint64_t fnv1a(std::string_view a, std::string_view b) {
  std::uint64_t h = 14695981039346656037ULL;
  auto mix = [&h](std::string_view s) {
    for (unsigned char c : s) {
      h ^= c;
      h *= 1099511628211ULL;
    }
  };
  mix(a);
  mix("/");
  mix(b);
  return h;
}

// Tenths between lo and hi inclusive, e.g. 10..100 -> 1.0..10.0.
double tenths(std::uint64_t h, int lo, int hi) {
  return static_cast<double>(lo + static_cast<int>(h % static_cast<std::uint64_t>(hi - lo + 1))) / 10.0;
}

}  // namespace

double expected_rating(std::string_view portal, std::string_view movie) {
  const auto h = fnv1a(portal, movie);
  if (portal == "rotten_tomatoes") return tenths(h, 0, 100);
  if (portal == "netflix" || portal == "amazon_prime") return tenths(h, 10, 50);
  return tenths(h, 10, 100);
}

nlohmann::json movie_json(std::string_view portal, std::string_view movie) {
  const double rating = expected_rating(portal, movie);
  const auto h = fnv1a(portal, movie) >> 16;
  const std::string name(movie);
  if (portal == "imdb") {
    return {{"title", name}, {"rating", rating}, {"votes", 100 + static_cast<std::int64_t>(h % 1'000'000)}};
  }
  if (portal == "rotten_tomatoes") {
    const double audience = static_cast<double>(h % 101) / 100.0;
    return {{"movie", name}, {"scores", {{"rating", rating}, {"audience", audience}}}};
  }
  if (portal == "sify") return {{"result", {{"name", name}, {"rating", rating}}}};
  if (portal == "netflix") return {{"items", nlohmann::json::array({{{"title", name}, {"rating", rating}}})}};
  return {{"product", {{"title", name}, {"rating", rating}, {"max", 5}}}};
}

std::string movie_body(std::string_view portal, std::string_view movie, MalformedBody mode) {
  switch (mode) {
    case MalformedBody::kNone: break;
    case MalformedBody::kTruncated: {
      const std::string full = movie_json(portal, movie).dump();
      return full.substr(0, full.size() / 2);
    }
    case MalformedBody::kHtml:
      return "<html><head><title>502 Bad Gateway</title></head><body>upstream hiccup</body></html>";
    case MalformedBody::kNoRating: {
      // Drop every "rating" key wherever the portal nests it.
      auto j = movie_json(portal, movie);
      auto strip = [](auto& self, nlohmann::json& node) -> void {
        if (node.is_object()) {
          node.erase("rating");
          for (auto& [_, v] : node.items()) self(self, v);
        } else if (node.is_array()) {
          for (auto& v : node) self(self, v);
        }
      };
      strip(strip, j);
      return j.dump();
    }
  }
  return movie_json(portal, movie).dump();
}

}  // namespace ratchet::mock_portal

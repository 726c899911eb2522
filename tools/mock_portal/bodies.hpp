// The JSON each portal answers for a movie, with a rating derived only from
// the movie's name, so tests and the demo know the answer in advance:
//   imdb             {"title": N, "rating": 8.6, "votes": 1234}           rating 1.0-10.0
//   rotten_tomatoes  {"movie": N, "scores": {"rating": 7.3, "audience": 0.91}}  0.0-10.0
//   sify             {"result": {"name": N, "rating": 8.1}}                1.0-10.0
//   netflix          {"items": [{"title": N, "rating": 4.5}]}              1.0-5.0
//   amazon_prime     {"product": {"title": N, "rating": 4.2, "max": 5}}    1.0-5.0
// Ratings have one decimal.
//
// Thread-safety: pure functions.
#pragma once

#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "mock_portal/options.hpp"

namespace ratchet::mock_portal {

// The "rating" value the portal sends for this movie. The portal must be one
// of portal_names().
double expected_rating(std::string_view portal, std::string_view movie);

// The portal's well-formed answer.
nlohmann::json movie_json(std::string_view portal, std::string_view movie);

// The body as sent: the JSON text, or its broken variant.
std::string movie_body(std::string_view portal, std::string_view movie, MalformedBody mode);

}  // namespace ratchet::mock_portal

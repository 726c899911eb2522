// The imdb portal: get_rating(name) -> {"rating": number}.
// The portal answers GET {base_url}/movies/{name} with
//   {"title": "...", "rating": 8.6, "votes": 1234}
#include "../common/portal.hpp"

namespace {

nlohmann::json get_rating(ratchet::plugin::Context& ctx, const nlohmann::json& args) {
  return ratchet::portal::rating_at(ratchet::portal::fetch_movie(ctx, args), "/rating");
}

}  // namespace

RATCHET_PLUGIN("imdb", "1.0.0", RATCHET_OP(get_rating))

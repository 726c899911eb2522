// The netflix portal: get_rating(name) -> {"rating": number}.
// The portal answers GET {base_url}/movies/{name} with
//   {"items": [{"title": "...", "rating": 4.5}]}
#include "../common/portal.hpp"

namespace {

nlohmann::json get_rating(ratchet::plugin::Context& ctx, const nlohmann::json& args) {
  return ratchet::portal::rating_at(ratchet::portal::fetch_movie(ctx, args), "/items/0/rating");
}

}  // namespace

RATCHET_PLUGIN("netflix", "1.0.0", RATCHET_OP(get_rating))

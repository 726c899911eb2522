// The rotten_tomatoes portal: get_rating(name) -> {"rating": number}.
// The portal answers GET {base_url}/movies/{name} with
//   {"movie": "...", "scores": {"rating": 7.3, "audience": 0.91}}
#include "../common/portal.hpp"

namespace {

nlohmann::json get_rating(ratchet::plugin::Context& ctx, const nlohmann::json& args) {
  return ratchet::portal::rating_at(ratchet::portal::fetch_movie(ctx, args), "/scores/rating");
}

}  // namespace

RATCHET_PLUGIN("rotten_tomatoes", "1.0.0", RATCHET_OP(get_rating))

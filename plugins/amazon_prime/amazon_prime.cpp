// The amazon_prime portal: get_rating(name) -> {"rating": number}.
// The portal answers GET {base_url}/movies/{name} with
//   {"product": {"title": "...", "rating": 4.2, "max": 5}}
#include "../common/portal.hpp"

namespace {

nlohmann::json get_rating(ratchet::plugin::Context& ctx, const nlohmann::json& args) {
  return ratchet::portal::rating_at(ratchet::portal::fetch_movie(ctx, args), "/product/rating");
}

}  // namespace

RATCHET_PLUGIN("amazon_prime", "1.0.0", RATCHET_OP(get_rating))

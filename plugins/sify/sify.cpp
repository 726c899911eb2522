// The sify portal: get_rating(name) -> {"rating": number}.
// The portal answers GET {base_url}/movies/{name} with
//   {"result": {"name": "...", "rating": 8.1}}
#include "../common/portal.hpp"

namespace {

nlohmann::json get_rating(ratchet::plugin::Context& ctx, const nlohmann::json& args) {
  return ratchet::portal::rating_at(ratchet::portal::fetch_movie(ctx, args), "/result/rating");
}

}  // namespace

RATCHET_PLUGIN("sify", "1.0.0", RATCHET_OP(get_rating))

// What the five movie-portal plugins share: fetch `GET {base_url}/movies/{name}`
// through the engine and hand back the JSON body, and pull a number out of it.
// Each portal keeps only its own parsing in its own folder.
//
// Errors follow the SDK: 429 -> Throttled (with the host's retry-after),
// 5xx -> Retryable, other non-2xx -> Fatal, a malformed body or a missing
// number -> Fatal quoting the body's first bytes.
//
// Thread-safety: stateless; used per call.
#pragma once

#include <string>

#include <nlohmann/json.hpp>

#include "ratchet/plugin.hpp"

namespace ratchet::portal {

namespace rp = ratchet::plugin;

// The fetched body, both raw (for messages) and parsed.
struct MovieReply {
  std::string body;
  std::string url;
  nlohmann::json json;
};

// GET {base_url}/movies/{url-encoded args.name}, status mapped, body parsed.
inline MovieReply fetch_movie(rp::Context& ctx, const nlohmann::json& args) {
  std::string base = ctx.setting("base_url");
  while (!base.empty() && base.back() == '/') base.pop_back();
  const std::string url = base + "/movies/" + rp::url_encode(rp::string_arg(args, "name"));
  rp::Response response = ctx.http().get(url, {{"Accept", "application/json"}});
  response.raise_for_status();
  return {response.body, url, response.json()};
}

// The number at `pointer` (e.g. "/scores/rating") as {"rating": n}, or Fatal
// naming the pointer and quoting the body.
inline nlohmann::json rating_at(const MovieReply& reply, const char* pointer) {
  const nlohmann::json::json_pointer ptr(pointer);
  if (!reply.json.contains(ptr) || !reply.json.at(ptr).is_number())
    throw rp::Fatal("no number at " + std::string(pointer) + " in the reply from " + reply.url + ": \"" +
                    rp::printable_prefix(reply.body) + "\"");
  return {{"rating", reply.json.at(ptr).get<double>()}};
}

}  // namespace ratchet::portal

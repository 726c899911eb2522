#include <array>

#include "config/sections.hpp"

namespace ratchet::config::detail {
namespace {

constexpr std::array<std::string_view, 3> kWebKeys = {"listen", "token", "read_only"};

}  // namespace

WebSpec read_web(Reader& r, const toml::table& t) {
  WebSpec web;
  r.check_keys(t, "web", kWebKeys, "the [web] section");
  for (auto&& [key, value] : t) {
    const std::string k(key.str());
    const std::string at = child_path("web", k);
    if (k == "listen") {
      if (auto v = r.string(value, at)) {
        const auto colon = v->value.rfind(':');
        if (colon == std::string::npos || colon == 0 || colon + 1 == v->value.size()) {
          r.error(value, at, "write HOST:PORT, e.g. \"127.0.0.1:8077\"");
        } else {
          web.listen = v->value;
        }
      }
    } else if (k == "token") {
      if (auto v = r.string(value, at)) {
        // Anyone who can read the file would hold the dashboard's key.
        if (!v->from_env) {
          r.error(value, at,
                  "the dashboard's token must come from the environment: token = \"${NAME}\", with NAME "
                  "set to a long random value (e.g. from `openssl rand -hex 32`)");
        } else if (v->value.size() < 16) {
          r.error(value, at, "the token is shorter than 16 characters; use a long random value");
        } else {
          web.token = v->value;
        }
      }
    } else if (k == "read_only") {
      if (auto v = r.boolean(value, at)) web.read_only = *v;
    }
  }
  return web;
}

}  // namespace ratchet::config::detail

// http_json: a portal described entirely in TOML, no C++ needed.
//
//   [plugin.http_json]
//   url     = "https://api.example.com/v1/movies/{{args.name}}"   # required
//   method  = "GET"                                               # default GET
//   headers = { Authorization = "Bearer ${EXAMPLE_TOKEN}" }       # values may use {{args.X}}
//   body    = { query = "{{args.name}}" }                         # optional; string or table
//   extract = "/data/rating"                                      # JSON pointer; default: whole reply
//   output  = "rating"                                            # key of the result; default "value"
//
// Operation `request(args) -> {"<output>": <extracted JSON>}`. In the URL a
// placeholder is percent-encoded; in headers and string bodies it is copied
// as is; a body string that is exactly one placeholder takes the argument's
// JSON value (so numbers stay numbers). Secrets from ${ENV} are resolved by
// the engine before the plugin sees its settings and are never echoed here.
#include <string>

#include <nlohmann/json.hpp>

#include "ratchet/plugin.hpp"

namespace {

namespace rp = ratchet::plugin;
using nlohmann::json;

enum class Escape { kNone, kUrl };

std::string arg_text(const json& value) {
  return value.is_string() ? value.get<std::string>() : value.dump();
}

// Replaces each {{args.X}} in `tpl` with argument X. `where` names the
// setting for error messages.
std::string fill(const std::string& tpl, const json& args, Escape escape, const std::string& where) {
  std::string out;
  std::size_t pos = 0;
  while (true) {
    std::size_t open = tpl.find("{{", pos);
    if (open == std::string::npos) break;
    std::size_t close = tpl.find("}}", open);
    if (close == std::string::npos) throw rp::Fatal("setting '" + where + "' has an unclosed '{{'");
    out.append(tpl, pos, open - pos);
    std::string key = tpl.substr(open + 2, close - open - 2);
    if (key.rfind("args.", 0) != 0)
      throw rp::Fatal("setting '" + where + "' uses {{" + key + "}}; only {{args.NAME}} placeholders exist");
    key.erase(0, 5);
    auto it = args.find(key);
    if (it == args.end())
      throw rp::Fatal("setting '" + where + "' uses {{args." + key + "}} but the call has no argument '" +
                      key + "'");
    out += escape == Escape::kUrl ? rp::url_encode(arg_text(*it)) : arg_text(*it);
    pos = close + 2;
  }
  out.append(tpl, pos);
  return out;
}

// A body template: strings filled in, a lone placeholder keeps its JSON type.
json fill_json(const json& tpl, const json& args) {
  if (tpl.is_string()) {
    const auto& s = tpl.get_ref<const std::string&>();
    if (s.size() > 9 && s.rfind("{{args.", 0) == 0 && s.find("}}") == s.size() - 2) {
      auto it = args.find(s.substr(7, s.size() - 9));
      if (it != args.end()) return *it;
    }
    return fill(s, args, Escape::kNone, "body");
  }
  if (tpl.is_structured()) {
    json out = tpl;
    for (auto& [k, v] : out.items()) v = fill_json(v, args);
    return out;
  }
  return tpl;
}

json request(rp::Context& ctx, const json& args) {
  const json& cfg = ctx.config();
  const std::string url = fill(ctx.setting("url"), args, Escape::kUrl, "url");
  const std::string method = cfg.value("method", std::string("GET"));

  rp::Headers headers{{"Accept", "application/json"}};
  if (auto h = cfg.find("headers"); h != cfg.end()) {
    if (!h->is_object()) throw rp::Fatal("setting 'headers' must be a table of strings");
    for (const auto& [name, value] : h->items()) {
      if (!value.is_string()) throw rp::Fatal("header '" + name + "' must be a string");
      headers.emplace_back(name, fill(value.get<std::string>(), args, Escape::kNone, "headers." + name));
    }
  }
  std::string body;
  if (auto b = cfg.find("body"); b != cfg.end()) {
    json filled = fill_json(*b, args);
    if (filled.is_string()) {
      body = filled.get<std::string>();
    } else {
      body = filled.dump();
      headers.emplace_back("Content-Type", "application/json");
    }
  }

  rp::Response response = ctx.http().request(method, url, headers, body);
  response.raise_for_status();
  json reply = response.json();

  json value = reply;
  if (auto e = cfg.find("extract"); e != cfg.end()) {
    if (!e->is_string())
      throw rp::Fatal("setting 'extract' must be a JSON pointer string such as \"/data/rating\"");
    json::json_pointer ptr;
    try {
      ptr = json::json_pointer(e->get<std::string>());
    } catch (const json::exception&) {
      throw rp::Fatal("setting 'extract' is not a JSON pointer (it must start with '/'): \"" +
                      e->get<std::string>() + "\"");
    }
    if (!reply.contains(ptr))
      throw rp::Fatal("nothing at " + e->get<std::string>() + " in the reply from " + rp::redact_url(url) +
                      ": \"" + rp::printable_prefix(response.body) + "\"");
    value = reply.at(ptr);
  }
  return {{cfg.value("output", std::string("value")), value}};
}

}  // namespace

RATCHET_PLUGIN("http_json", "1.0.0", RATCHET_OP(request))

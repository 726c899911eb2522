// http_json: a portal described entirely in TOML, no C++ needed.
//
//   [plugin.http_json]
//   url     = "https://api.example.com/v1/movies/{{args.name}}"   # required
//   method  = "GET"                                               # default GET
//   headers = { Authorization = "Bearer ${EXAMPLE_TOKEN}" }       # values may use {{args.X}}
//   body    = { query = "{{args.name}}" }                         # optional; string or table
//   extract = "/data/rating"                                      # JSON pointer; default: whole reply
//   output  = "rating"                                            # key of the result; default "value"
//   estimate     = "{{args.points}}"      # optional: the units the request is expected to cost
//   cost_header  = "X-Query-Cost"         # optional: the reply header that says what the call cost
//   cost_pointer = "/extensions/cost"     # optional: or the JSON pointer in the reply that does
//
// Operation `request(args) -> {"<output>": <extracted JSON>}`. In the URL a
// placeholder is percent-encoded; in headers and string bodies it is copied
// as is; a body string that is exactly one placeholder takes the argument's
// JSON value (so numbers stay numbers). Secrets from ${ENV} are resolved by
// the engine before the plugin sees its settings and are never echoed here.
//
// A reply's cost (a whole number of units of the plugin's limits, as a
// GraphQL cost field or a header reports it) is passed to the engine, which
// corrects the limits at once; a cost that is not a whole number from 0 to
// 1e9 is ignored with a warning, as the call itself succeeded.
#include <cstdint>
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

// A setting that holds a JSON pointer ("/data/rating"); Fatal naming it otherwise.
json::json_pointer pointer(const json& setting, const std::string& name) {
  if (!setting.is_string())
    throw rp::Fatal("setting '" + name + "' must be a JSON pointer string such as \"/data/rating\"");
  try {
    return json::json_pointer(setting.get<std::string>());
  } catch (const json::exception&) {
    throw rp::Fatal("setting '" + name + "' is not a JSON pointer (it must start with '/'): \"" +
                    setting.get<std::string>() + "\"");
  }
}

// Passes a reply's cost on; `from` names where it was read.
void report_cost(rp::Context& ctx, const json& value, const std::string& from) {
  constexpr std::int64_t kMaxCost = 1'000'000'000;
  std::int64_t units = -1;
  if (value.is_number_unsigned()) {
    const auto u = value.get<std::uint64_t>();
    units = u > static_cast<std::uint64_t>(kMaxCost) ? -1 : static_cast<std::int64_t>(u);
  } else if (value.is_number_integer()) {
    units = value.get<std::int64_t>();
  } else if (value.is_number_float()) {
    const double d = value.get<double>();
    if (d >= 0 && d <= static_cast<double>(kMaxCost) &&
        d == static_cast<double>(static_cast<std::int64_t>(d)))
      units = static_cast<std::int64_t>(d);
  } else if (value.is_string()) {
    const std::string& text = value.get_ref<const std::string&>();
    if (!text.empty() && text.size() <= 10 && text.find_first_not_of("0123456789") == std::string::npos)
      units = std::stoll(text);
  }
  if (units < 0 || units > kMaxCost) {
    ctx.log().warn("the reply's cost in " + from + " is not a whole number from 0 to 1e9 (\"" +
                   rp::printable_prefix(value.dump()) + "\"); the call counts at its estimate");
    return;
  }
  ctx.http().report_cost(units);
}

// The units the request is expected to cost (setting `estimate`); 0: the
// operation's declared cost. The engine asks it before admitting the call
// (RATCHET_OP_ESTIMATED), and the request carries it too.
std::int64_t estimate(const json& args, const json& cfg) {
  auto e = cfg.find("estimate");
  if (e == cfg.end()) return 0;
  const std::string text =
      e->is_string() ? fill(e->get<std::string>(), args, Escape::kNone, "estimate") : e->dump();
  if (text.empty() || text.size() > 10 || text.find_first_not_of("0123456789") != std::string::npos ||
      std::stoll(text) < 1 || std::stoll(text) > 1'000'000'000)
    throw rp::Fatal(
        "setting 'estimate' must be a whole number from 1 to 1e9 (or {{args.X}} holding one); it is " +
        rp::printable_prefix(text));
  return std::stoll(text);
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

  rp::Response response = ctx.http().request(method, url, headers, body, estimate(args, cfg));
  if (auto h = cfg.find("cost_header"); h != cfg.end()) {
    if (!h->is_string())
      throw rp::Fatal("setting 'cost_header' must be a header name such as \"X-Query-Cost\"");
    if (auto v = response.header(h->get<std::string>()))
      report_cost(ctx, json(*v), "header " + h->get<std::string>());
  }
  response.raise_for_status();
  json reply = response.json();
  if (auto c = cfg.find("cost_pointer"); c != cfg.end()) {
    const auto ptr = pointer(*c, "cost_pointer");
    if (reply.contains(ptr)) report_cost(ctx, reply.at(ptr), c->get<std::string>() + " of the reply");
  }

  json value = reply;
  if (auto e = cfg.find("extract"); e != cfg.end()) {
    const auto ptr = pointer(*e, "extract");
    if (!reply.contains(ptr))
      throw rp::Fatal("nothing at " + e->get<std::string>() + " in the reply from " + rp::redact_url(url) +
                      ": \"" + rp::printable_prefix(response.body) + "\"");
    value = reply.at(ptr);
  }
  return {{cfg.value("output", std::string("value")), value}};
}

}  // namespace

RATCHET_PLUGIN("http_json", "1.1.0", RATCHET_OP_ESTIMATED(request, estimate))

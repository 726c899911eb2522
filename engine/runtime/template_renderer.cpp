#include "runtime/template_renderer.hpp"

#include <string>
#include <string_view>

namespace ratchet::runtime {
namespace {

std::string_view trim(std::string_view s) {
  while (!s.empty() && s.front() == ' ') s.remove_prefix(1);
  while (!s.empty() && s.back() == ' ') s.remove_suffix(1);
  return s;
}

Result<nlohmann::json> lookup(std::string_view path, const nlohmann::json& context) {
  const nlohmann::json* cur = &context;
  std::string_view rest = path;
  while (!rest.empty()) {
    auto dot = rest.find('.');
    std::string key(rest.substr(0, dot));
    rest = dot == std::string_view::npos ? std::string_view() : rest.substr(dot + 1);
    if (cur->is_object() && cur->contains(key)) {
      cur = &(*cur)[key];
    } else if (cur->is_array() && !key.empty() && key.find_first_not_of("0123456789") == std::string::npos &&
               std::stoul(key) < cur->size()) {
      cur = &(*cur)[std::stoul(key)];
    } else {
      return fail(Error::invalid_argument("template placeholder {{" + std::string(path) +
                                          "}}: no value at \"" + key + "\""));
    }
  }
  return *cur;
}

Result<nlohmann::json> render_string(const std::string& s, const nlohmann::json& context) {
  auto open = s.find("{{");
  if (open == std::string::npos) return s;
  auto close = s.find("}}", open);
  if (open == 0 && close == s.size() - 2 && s.find("{{", 2) == std::string::npos) {
    return lookup(trim(std::string_view(s).substr(2, s.size() - 4)), context);
  }
  std::string out;
  std::size_t pos = 0;
  while ((open = s.find("{{", pos)) != std::string::npos) {
    close = s.find("}}", open);
    if (close == std::string::npos) {
      return fail(Error::invalid_argument("template \"" + s + "\": \"{{\" is not closed by \"}}\""));
    }
    out += s.substr(pos, open - pos);
    auto v = lookup(trim(std::string_view(s).substr(open + 2, close - open - 2)), context);
    if (!v) return v;
    out += v->is_string() ? v->get<std::string>() : v->dump();
    pos = close + 2;
  }
  out += s.substr(pos);
  return out;
}

}  // namespace

Result<nlohmann::json> render_template_basic(const nlohmann::json& tmpl, const nlohmann::json& context) {
  if (tmpl.is_string()) return render_string(tmpl.get<std::string>(), context);
  if (tmpl.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (const auto& [k, v] : tmpl.items()) {
      auto r = render_template_basic(v, context);
      if (!r) return r;
      out[k] = std::move(*r);
    }
    return out;
  }
  if (tmpl.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& v : tmpl) {
      auto r = render_template_basic(v, context);
      if (!r) return r;
      out.push_back(std::move(*r));
    }
    return out;
  }
  return tmpl;
}

}  // namespace ratchet::runtime

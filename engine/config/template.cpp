#include "config/template.hpp"

#include <charconv>
#include <cstddef>
#include <optional>
#include <variant>

namespace ratchet::config {
namespace {

constexpr std::string_view kOpen = "{{";
constexpr std::string_view kClose = "}}";

std::string_view trim(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// One piece of a template string: literal text or a placeholder expression.
struct Piece {
  bool placeholder = false;
  std::string_view text;
};

// Splits a string into pieces; nullopt when a "{{" is never closed.
std::optional<std::vector<Piece>> split(std::string_view s) {
  std::vector<Piece> out;
  std::size_t pos = 0;
  while (pos < s.size()) {
    std::size_t open = s.find(kOpen, pos);
    if (open == std::string_view::npos) {
      out.push_back({false, s.substr(pos)});
      break;
    }
    if (open > pos) out.push_back({false, s.substr(pos, open - pos)});
    std::size_t close = s.find(kClose, open + kOpen.size());
    if (close == std::string_view::npos) return std::nullopt;
    out.push_back({true, trim(s.substr(open + kOpen.size(), close - open - kOpen.size()))});
    pos = close + kClose.size();
  }
  return out;
}

std::vector<std::string> split_dots(std::string_view s) {
  std::vector<std::string> parts;
  std::size_t pos = 0;
  while (true) {
    std::size_t dot = s.find('.', pos);
    parts.emplace_back(s.substr(pos, dot == std::string_view::npos ? std::string_view::npos : dot - pos));
    if (dot == std::string_view::npos) break;
    pos = dot + 1;
  }
  return parts;
}

template <typename Visit>
void for_each_string(const nlohmann::json& j, Visit&& visit) {
  if (j.is_string()) {
    visit(j.get_ref<const std::string&>());
  } else if (j.is_structured()) {
    for (const auto& item : j) for_each_string(item, visit);
  }
}

Error missing(const TemplateRef& ref, const std::string& resolved, const std::string& key) {
  return Error::invalid_argument("placeholder {{" + ref.text + "}}: " + resolved + " has no " + key +
                                 " (check the job's arguments and the steps it waits for)");
}

Result<const nlohmann::json*> resolve(const TemplateRef& ref, const nlohmann::json& context) {
  const nlohmann::json* at = nullptr;
  std::string resolved;
  if (ref.root == TemplateRef::Root::kArgs || ref.root == TemplateRef::Root::kSettings) {
    const char* root = ref.root == TemplateRef::Root::kArgs ? "args" : "settings";
    if (!context.is_object() || !context.contains(root)) return fail(missing(ref, "the context", root));
    at = &context[root];
    resolved = root;
  } else {
    if (!context.is_object() || !context.contains("steps") || !context["steps"].is_object() ||
        !context["steps"].contains(ref.step)) {
      return fail(Error::invalid_argument("placeholder {{" + ref.text + "}}: step '" + ref.step +
                                          "' has no output yet (list it in this step's `after`)"));
    }
    const auto& step = context["steps"][ref.step];
    if (!step.is_object() || !step.contains("output")) {
      return fail(Error::invalid_argument("placeholder {{" + ref.text + "}}: step '" + ref.step +
                                          "' has no output yet (list it in this step's `after`)"));
    }
    at = &step["output"];
    resolved = "steps." + ref.step + ".output";
  }
  for (const auto& key : ref.path) {
    if (at->is_object()) {
      auto it = at->find(key);
      if (it == at->end()) return fail(missing(ref, "'" + resolved + "'", "key '" + key + "'"));
      at = &*it;
    } else if (at->is_array()) {
      std::size_t index = 0;
      auto [ptr, ec] = std::from_chars(key.data(), key.data() + key.size(), index);
      if (ec != std::errc() || ptr != key.data() + key.size()) {
        return fail(missing(ref, "'" + resolved + "' (an array)", "key '" + key + "'"));
      }
      if (index >= at->size()) {
        return fail(
            missing(ref, "'" + resolved + "' (" + std::to_string(at->size()) + " items)", "index " + key));
      }
      at = &(*at)[index];
    } else {
      return fail(
          missing(ref, "'" + resolved + "' (a " + std::string(at->type_name()) + ")", "key '" + key + "'"));
    }
    resolved += "." + key;
  }
  return at;
}

Result<nlohmann::json> render_string(const std::string& s, const nlohmann::json& context) {
  auto pieces = split(s);
  if (!pieces) {
    return fail(Error::invalid_argument("template \"" + s + "\": a \"{{\" is never closed with \"}}\""));
  }
  if (pieces->size() == 1 && (*pieces)[0].placeholder) {
    auto ref = parse_template_ref((*pieces)[0].text);
    if (!ref) return fail(ref.error());
    auto value = resolve(*ref, context);
    if (!value) return fail(value.error());
    return **value;
  }
  std::string out;
  for (const auto& piece : *pieces) {
    if (!piece.placeholder) {
      out += piece.text;
      continue;
    }
    auto ref = parse_template_ref(piece.text);
    if (!ref) return fail(ref.error());
    auto value = resolve(*ref, context);
    if (!value) return fail(value.error());
    if ((*value)->is_string()) {
      out += (*value)->get_ref<const std::string&>();
    } else {
      out += (*value)->dump();
    }
  }
  return nlohmann::json(std::move(out));
}

// The path segments of a placeholder, or why it is malformed.
std::variant<std::vector<std::string>, std::string_view> path_segments(const std::string& text) {
  if (text.empty()) return std::string_view("it is empty");
  auto parts = split_dots(text);
  for (const auto& p : parts) {
    if (p.empty()) return std::string_view("it has an empty path segment");
    for (char c : p) {
      bool ok =
          (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' || c == '-';
      if (!ok) return std::string_view("it holds a character other than letters, digits, '_', '-' and '.'");
    }
  }
  return parts;
}

}  // namespace

Result<TemplateRef> parse_template_ref(std::string_view expression) {
  std::string text(trim(expression));
  auto bad = [&](std::string_view why) {
    return fail(Error::invalid_argument("placeholder {{" + text + "}}: " + std::string(why) +
                                        " (write {{args.NAME}} or {{steps.STEP.output.KEY}})"));
  };
  auto segments = path_segments(text);
  if (auto* why = std::get_if<std::string_view>(&segments)) return bad(*why);
  const auto& parts = std::get<std::vector<std::string>>(segments);
  TemplateRef ref;
  ref.text = text;
  if (parts[0] == "args") {
    if (parts.size() < 2) return bad("it names no argument");
    ref.root = TemplateRef::Root::kArgs;
    ref.path.assign(parts.begin() + 1, parts.end());
    return ref;
  }
  if (parts[0] == "steps") {
    if (parts.size() < 3 || parts[2] != "output") return bad("a step is read as steps.STEP.output");
    ref.root = TemplateRef::Root::kSteps;
    ref.step = parts[1];
    ref.path.assign(parts.begin() + 3, parts.end());
    return ref;
  }
  return bad("it must start with 'args.' or 'steps.'");
}

std::vector<std::string> placeholders(const nlohmann::json& tmpl) {
  std::vector<std::string> out;
  for_each_string(tmpl, [&](const std::string& s) {
    // An unterminated "{{" stops the scan of that string only: the pieces
    // before it are still listed.
    std::size_t pos = 0;
    while (true) {
      std::size_t open = s.find(kOpen, pos);
      if (open == std::string::npos) break;
      std::size_t close = s.find(kClose, open + kOpen.size());
      if (close == std::string::npos) break;
      out.emplace_back(trim(std::string_view(s).substr(open + kOpen.size(), close - open - kOpen.size())));
      pos = close + kClose.size();
    }
  });
  return out;
}

std::vector<std::string> template_errors(const nlohmann::json& tmpl) {
  std::vector<std::string> out;
  for_each_string(tmpl, [&](const std::string& s) {
    if (!split(s)) out.push_back("template \"" + s + "\": a \"{{\" is never closed with \"}}\"");
  });
  for (const auto& expr : placeholders(tmpl)) {
    auto ref = parse_template_ref(expr);
    if (!ref) out.push_back(ref.error().message());
  }
  return out;
}

Result<nlohmann::json> render_template(const nlohmann::json& tmpl, const nlohmann::json& context) {
  if (tmpl.is_string()) return render_string(tmpl.get_ref<const std::string&>(), context);
  if (tmpl.is_object()) {
    nlohmann::json out = nlohmann::json::object();
    for (auto it = tmpl.begin(); it != tmpl.end(); ++it) {
      auto value = render_template(it.value(), context);
      if (!value) return fail(value.error());
      out[it.key()] = std::move(*value);
    }
    return out;
  }
  if (tmpl.is_array()) {
    nlohmann::json out = nlohmann::json::array();
    for (const auto& item : tmpl) {
      auto value = render_template(item, context);
      if (!value) return fail(value.error());
      out.push_back(std::move(*value));
    }
    return out;
  }
  return tmpl;
}

Result<TemplateRef> parse_key_ref(std::string_view expression) {
  std::string text(trim(expression));
  auto bad = [&](std::string_view why) {
    return fail(Error::invalid_argument("placeholder {{" + text + "}}: " + std::string(why) +
                                        " (a limit's key reads {{args.NAME}} or {{settings.NAME}})"));
  };
  auto segments = path_segments(text);
  if (auto* why = std::get_if<std::string_view>(&segments)) return bad(*why);
  const auto& parts = std::get<std::vector<std::string>>(segments);
  TemplateRef ref;
  ref.text = text;
  if (parts.size() < 2 || (parts[0] != "args" && parts[0] != "settings"))
    return bad("it must name a job argument or a plugin setting");
  ref.root = parts[0] == "args" ? TemplateRef::Root::kArgs : TemplateRef::Root::kSettings;
  ref.path.assign(parts.begin() + 1, parts.end());
  return ref;
}

std::vector<std::string> key_template_errors(std::string_view tmpl) {
  std::vector<std::string> out;
  auto pieces = split(tmpl);
  if (!pieces) return {"a \"{{\" is never closed with \"}}\""};
  bool any = false;
  for (const auto& piece : *pieces) {
    if (!piece.placeholder) continue;
    any = true;
    if (auto ref = parse_key_ref(piece.text); !ref) out.push_back(ref.error().message());
  }
  if (!any)
    out.emplace_back(
        "a key holds at least one placeholder, e.g. \"{{args.account}}\" (without one, remove `key`: the "
        "limit is one budget)");
  return out;
}

Result<KeyTemplate> parse_key_template(std::string_view tmpl) {
  auto pieces = split(tmpl);
  if (!pieces)
    return fail(Error::invalid_argument("limit key \"" + std::string(tmpl) + "\": a \"{{\" is never closed"));
  KeyTemplate out;
  for (const auto& piece : *pieces) {
    if (!piece.placeholder) {
      out.pieces.push_back({std::string(piece.text), std::nullopt});
      continue;
    }
    auto ref = parse_key_ref(piece.text);
    if (!ref) return fail(ref.error());
    out.pieces.push_back({{}, std::move(*ref)});
  }
  return out;
}

Result<std::string> render_key(const KeyTemplate& tmpl, const nlohmann::json& args,
                               const nlohmann::json& settings) {
  std::string out;
  for (const auto& piece : tmpl.pieces) {
    if (!piece.ref) {
      out += piece.literal;
      continue;
    }
    const TemplateRef& ref = *piece.ref;
    const nlohmann::json* at = ref.root == TemplateRef::Root::kArgs ? &args : &settings;
    for (std::size_t i = 0; i < ref.path.size(); ++i) {
      const std::string& key = ref.path[i];
      const nlohmann::json* next = nullptr;
      if (at->is_object()) {
        auto it = at->find(key);
        if (it != at->end()) next = &*it;
      } else if (at->is_array()) {
        std::size_t index = 0;
        auto [ptr, ec] = std::from_chars(key.data(), key.data() + key.size(), index);
        if (ec == std::errc() && ptr == key.data() + key.size() && index < at->size()) next = &(*at)[index];
      }
      if (next == nullptr) {
        std::string resolved = ref.root == TemplateRef::Root::kArgs ? "args" : "settings";
        for (std::size_t k = 0; k < i; ++k) resolved += "." + ref.path[k];
        return fail(Error::invalid_argument("limit key {{" + ref.text + "}}: '" + resolved + "' has no '" +
                                            key + "' (give every job of this plugin that argument)"));
      }
      at = next;
    }
    if (at->is_string()) {
      out += at->get_ref<const std::string&>();
    } else {
      out += at->dump();
    }
  }
  return out;
}

Result<std::string> render_key(std::string_view tmpl, const nlohmann::json& args,
                               const nlohmann::json& settings) {
  auto parsed = parse_key_template(tmpl);
  if (!parsed) return fail(parsed.error());
  return render_key(*parsed, args, settings);
}

}  // namespace ratchet::config

#include "runtime/args_check.hpp"

#include <cstdint>
#include <utility>
#include <vector>

namespace ratchet::runtime {
namespace {

bool valid_utf8(const std::string& s) {
  std::size_t i = 0;
  while (i < s.size()) {
    const auto c = static_cast<unsigned char>(s[i]);
    std::size_t n = 0;
    std::uint32_t cp = 0;
    if (c < 0x80) {
      ++i;
      continue;
    } else if ((c >> 5) == 0x6) {
      n = 1;
      cp = c & 0x1F;
    } else if ((c >> 4) == 0xE) {
      n = 2;
      cp = c & 0x0F;
    } else if ((c >> 3) == 0x1E) {
      n = 3;
      cp = c & 0x07;
    } else {
      return false;
    }
    if (i + n >= s.size()) return false;  // truncated sequence
    for (std::size_t k = 1; k <= n; ++k) {
      const auto d = static_cast<unsigned char>(s[i + k]);
      if ((d >> 6) != 0x2) return false;
      cp = (cp << 6) | (d & 0x3F);
    }
    // Overlong forms, surrogates and values past U+10FFFF are not UTF-8.
    if ((n == 1 && cp < 0x80) || (n == 2 && cp < 0x800) || (n == 3 && cp < 0x10000) || cp > 0x10FFFF ||
        (cp >= 0xD800 && cp <= 0xDFFF)) {
      return false;
    }
    i += n + 1;
  }
  return true;
}

std::string pointer_escape(const std::string& key) {
  std::string out;
  for (char c : key) {
    if (c == '~') {
      out += "~0";
    } else if (c == '/') {
      out += "~1";
    } else {
      out += c;
    }
  }
  return out;
}

// A value shown in an error: short, and printable whatever it holds.
std::string shown(const nlohmann::json& v) {
  std::string text = v.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
  if (text.size() > 80) text = text.substr(0, 77) + "...";
  return text;
}

const char* type_name(config::ArgType t) {
  switch (t) {
    case config::ArgType::kString: return "a string";
    case config::ArgType::kNumber: return "a number";
    case config::ArgType::kInteger: return "an integer";
    case config::ArgType::kBoolean: return "a boolean";
    case config::ArgType::kObject: return "an object";
    case config::ArgType::kArray: return "an array";
    case config::ArgType::kAny: return "any value";
  }
  return "?";
}

bool matches(config::ArgType t, const nlohmann::json& v) {
  switch (t) {
    case config::ArgType::kString: return v.is_string();
    case config::ArgType::kNumber: return v.is_number();
    case config::ArgType::kInteger: return v.is_number_integer();
    case config::ArgType::kBoolean: return v.is_boolean();
    case config::ArgType::kObject: return v.is_object();
    case config::ArgType::kArray: return v.is_array();
    case config::ArgType::kAny: return true;
  }
  return false;
}

}  // namespace

Status check_args_bounds(const std::string& job_type, const nlohmann::json& args) {
  auto bad = [&](const std::string& why) {
    return fail(Error::invalid_argument("job type \"" + job_type + "\": " + why));
  };
  struct Item {
    const nlohmann::json* value;
    int depth;
    std::string pointer;
  };
  // The field a pointer is in: "/tree/0/1" -> argument "tree".
  auto field = [](const std::string& pointer) {
    const std::size_t end = pointer.find('/', 1);
    return "argument \"" + pointer.substr(1, end == std::string::npos ? std::string::npos : end - 1) + "\"";
  };
  std::vector<Item> todo{{&args, 0, ""}};
  std::size_t bytes = 0;
  while (!todo.empty()) {
    Item item = std::move(todo.back());
    todo.pop_back();
    const nlohmann::json& v = *item.value;
    const bool container = v.is_object() || v.is_array();
    if (container && item.depth >= kMaxArgsDepth) {
      return bad(field(item.pointer) + " nests deeper than " + std::to_string(kMaxArgsDepth) +
                 " levels (at " + item.pointer.substr(0, 60) + (item.pointer.size() > 60 ? "..." : "") +
                 "); flatten it");
    }
    bytes += 8;  // punctuation and small scalars, roughly
    if (v.is_string()) {
      const auto& s = v.get_ref<const std::string&>();
      bytes += s.size();
      if (!valid_utf8(s)) {
        return bad(field(item.pointer) + " is not valid UTF-8 text (at " + item.pointer +
                   "); JSON text carries only UTF-8");
      }
    } else if (v.is_object()) {
      for (const auto& [k, child] : v.items()) {
        bytes += k.size();
        if (!valid_utf8(k)) {
          return bad((item.depth == 0 ? std::string("an argument name") : field(item.pointer)) +
                     " holds a key that is not valid UTF-8 text; JSON text carries only UTF-8");
        }
        todo.push_back({&child, item.depth + 1, item.pointer + "/" + pointer_escape(k)});
      }
    } else if (v.is_array()) {
      for (std::size_t i = 0; i < v.size(); ++i) {
        todo.push_back({&v[i], item.depth + 1, item.pointer + "/" + std::to_string(i)});
      }
    }
    if (bytes > kMaxArgsBytes) {
      return bad("arguments are larger than the limit of 1 MiB as JSON (the largest near " +
                 (item.pointer.empty() ? std::string("the top") : field(item.pointer)) +
                 "); pass a reference such as an id or a URL instead");
    }
  }
  return {};
}

Status check_args(const std::string& job_type, const std::vector<config::ArgSpec>& declared,
                  const nlohmann::json& args) {
  auto bad = [&](const std::string& why) {
    return fail(Error::invalid_argument("job type \"" + job_type + "\": " + why));
  };
  if (!args.is_object()) return bad("arguments must be a JSON object, not " + std::string(args.type_name()));
  if (auto st = check_args_bounds(job_type, args); !st) return st;
  if (declared.empty()) return {};
  for (const auto& a : declared) {
    auto it = args.find(a.name);
    if (it == args.end()) {
      if (a.required) return bad("argument \"" + a.name + "\" is required (" + type_name(a.type) + ")");
      continue;
    }
    if (!matches(a.type, *it)) {
      return bad("argument \"" + a.name + "\" must be " + type_name(a.type) + ", not " + shown(*it));
    }
  }
  for (const auto& [k, v] : args.items()) {
    bool known = false;
    for (const auto& a : declared) known = known || a.name == k;
    if (!known) {
      std::string names;
      for (const auto& a : declared) names += (names.empty() ? "" : ", ") + a.name;
      return bad("unknown argument \"" + k + "\" (declared: " + names + ")");
    }
  }
  return {};
}

}  // namespace ratchet::runtime

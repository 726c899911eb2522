#include "runtime/args_check.hpp"

namespace ratchet::runtime {
namespace {

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

Status check_args(const std::string& job_type, const std::vector<config::ArgSpec>& declared,
                  const nlohmann::json& args) {
  auto bad = [&](const std::string& why) {
    return fail(Error::invalid_argument("job type \"" + job_type + "\": " + why));
  };
  if (!args.is_object()) return bad("arguments must be a JSON object, not " + std::string(args.type_name()));
  if (declared.empty()) return {};
  for (const auto& a : declared) {
    auto it = args.find(a.name);
    if (it == args.end()) {
      if (a.required) return bad("argument \"" + a.name + "\" is required (" + type_name(a.type) + ")");
      continue;
    }
    if (!matches(a.type, *it)) {
      return bad("argument \"" + a.name + "\" must be " + type_name(a.type) + ", not " + it->dump());
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

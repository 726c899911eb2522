// Fuzz target: the checks a job's arguments pass before the job is written,
// on the path `ratchet enqueue --json TEXT` takes: the text is parsed as
// JSON, checked against the job type's declared arguments, then encoded for
// the store.
//
// Input: a first line declaring the arguments, "name:T" or "name:T?"
// (optional) separated by ',', with T one of s n i b o a * (string, number,
// integer, boolean, object, array, any); then the JSON text.
//
// Invariants, beyond "never crashes" or overflows the stack:
//   - accepted arguments are an object; every required argument is present,
//     every declared one present has its type, and (when any are declared)
//     no other is there; the accepted value encodes and decodes to itself;
//   - a refusal names the job type and says which argument and why.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "config/spec.hpp"
#include "fuzz_check.hpp"
#include "runtime/args_check.hpp"

namespace {

using ratchet::config::ArgSpec;
using ratchet::config::ArgType;

std::vector<ArgSpec> declared_from(std::string_view line) {
  std::vector<ArgSpec> out;
  while (!line.empty()) {
    const std::size_t comma = line.find(',');
    std::string_view item = line.substr(0, comma);
    line = comma == std::string_view::npos ? std::string_view{} : line.substr(comma + 1);
    const std::size_t colon = item.rfind(':');
    if (colon == std::string_view::npos || colon == 0) continue;
    ArgSpec a;
    a.name = std::string(item.substr(0, colon));
    std::string_view t = item.substr(colon + 1);
    if (!t.empty() && t.back() == '?') {
      a.required = false;
      t.remove_suffix(1);
    }
    if (t == "s")
      a.type = ArgType::kString;
    else if (t == "n")
      a.type = ArgType::kNumber;
    else if (t == "i")
      a.type = ArgType::kInteger;
    else if (t == "b")
      a.type = ArgType::kBoolean;
    else if (t == "o")
      a.type = ArgType::kObject;
    else if (t == "a")
      a.type = ArgType::kArray;
    else if (t == "*")
      a.type = ArgType::kAny;
    else
      continue;
    out.push_back(std::move(a));
  }
  return out;
}

bool has_type(ArgType t, const nlohmann::json& v) {
  switch (t) {
    case ArgType::kString: return v.is_string();
    case ArgType::kNumber: return v.is_number();
    case ArgType::kInteger: return v.is_number_integer();
    case ArgType::kBoolean: return v.is_boolean();
    case ArgType::kObject: return v.is_object();
    case ArgType::kArray: return v.is_array();
    case ArgType::kAny: return true;
  }
  return false;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view input(reinterpret_cast<const char*>(data), size);
  const std::size_t newline = input.find('\n');
  const std::vector<ArgSpec> declared =
      declared_from(newline == std::string_view::npos ? std::string_view{} : input.substr(0, newline));
  const std::string_view text = newline == std::string_view::npos ? input : input.substr(newline + 1);

  const nlohmann::json args = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (args.is_discarded()) return 0;  // the command refuses text that is not JSON

  const std::string type = "fuzz_job";
  auto st = ratchet::runtime::check_args(type, declared, args);
  if (!st) {
    const std::string& m = st.error().message();
    FUZZ_CHECK(st.error().code() == ratchet::ErrorCode::kInvalidArgument, "refused with another code: " + m);
    FUZZ_CHECK(m.rfind("job type \"fuzz_job\": ", 0) == 0, "refusal does not name the job type: " + m);
    FUZZ_CHECK(m.size() > std::string("job type \"fuzz_job\": ").size(), "refusal says nothing: " + m);
    return 0;
  }
  FUZZ_CHECK(args.is_object(), "accepted arguments that are not an object");
  for (const auto& a : declared) {
    auto it = args.find(a.name);
    FUZZ_CHECK(it != args.end() || !a.required, "accepted without required argument " + a.name);
    FUZZ_CHECK(it == args.end() || has_type(a.type, *it),
               "accepted argument " + a.name + " of the wrong type");
  }
  if (!declared.empty()) {
    for (const auto& [k, v] : args.items()) {
      bool known = false;
      for (const auto& a : declared) known = known || a.name == k;
      FUZZ_CHECK(known, "accepted undeclared argument " + k);
    }
  }
  // What the engine stores, and what a worker reads back.
  const std::string stored = args.dump();
  const nlohmann::json read = nlohmann::json::parse(stored, nullptr, /*allow_exceptions=*/false);
  FUZZ_CHECK(!read.is_discarded(), "stored arguments are not JSON: " + stored.substr(0, 200));
  FUZZ_CHECK(read == args, "stored arguments read back differently: " + stored.substr(0, 200));
  return 0;
}

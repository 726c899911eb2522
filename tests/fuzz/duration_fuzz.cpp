// Fuzz target: the duration parser of config values and --in.
//
// Invariants, beyond "never crashes":
//   - a parsed duration is not negative (the grammar has no sign);
//   - it formats to a spelling that parses back to the same value, and that
//     spelling is a fixed point (formatting the reparsed value gives it again);
//   - a refusal quotes the text and says how to write a duration.
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "common/duration.hpp"
#include "fuzz_check.hpp"

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  using ratchet::common::format_duration;
  using ratchet::common::parse_duration;
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  auto parsed = parse_duration(text);
  if (!parsed) {
    const std::string& m = parsed.error().message();
    FUZZ_CHECK(m.find("invalid duration \"") == 0, "refusal does not quote the text: " + m);
    FUZZ_CHECK(m.find("write e.g.") != std::string::npos, "refusal does not say how to fix it: " + m);
    return 0;
  }
  const std::chrono::microseconds d = *parsed;
  const std::string shown = "\"" + std::string(text) + "\" -> " + std::to_string(d.count()) + "us";
  FUZZ_CHECK(d.count() >= 0, "negative duration: " + shown);
  const std::string formatted = format_duration(d);
  auto back = parse_duration(formatted);
  FUZZ_CHECK(back.has_value(), shown + " formats as \"" + formatted + "\", which does not parse: " +
                                   (back ? std::string() : back.error().message()));
  FUZZ_CHECK(*back == d, shown + " formats as \"" + formatted + "\", which parses as " +
                             std::to_string(back->count()) + "us");
  FUZZ_CHECK(format_duration(*back) == formatted, shown + ": \"" + formatted + "\" is not a fixed point");
  return 0;
}

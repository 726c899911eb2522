// Fuzz target: the config loader on arbitrary file contents.
//
// Invariants, beyond "never crashes":
//   - the file either loads or is refused with at least one diagnostic;
//   - every diagnostic names the file and a line and column >= 1, and says
//     something;
//   - a value that came from the environment (${NAME}) never appears in a
//     diagnostic or in the summary of a loaded file;
//   - loading is deterministic: the same text gives the same outcome.
#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include "config/load.hpp"
#include "config/summary.hpp"
#include "fuzz_check.hpp"

namespace {

constexpr std::string_view kFile = "fuzz.toml";
// What ${RATCHET_FUZZ_SECRET} and ${API_KEY} hold; distinctive so a leak is unmistakable.
constexpr std::string_view kSecret = "Zq7-fuzz-secret-Xv3";

std::optional<std::string> env(std::string_view name) {
  if (name == "RATCHET_FUZZ_SECRET" || name == "API_KEY") return std::string(kSecret);
  if (name == "EMPTY") return std::string();
  return std::nullopt;
}

std::string outcome(const ratchet::config::LoadResult& r) {
  if (r) return "loaded:\n" + ratchet::config::summarize(**r);
  return "refused:\n" + ratchet::config::to_string(r.error());
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  const std::string file(kFile);
  auto result = ratchet::config::load_string(text, file, env);
  // A secret written literally in the file is the user's own text, not a leak.
  const bool secret_in_text = text.find(kSecret) != std::string_view::npos;
  if (!result) {
    FUZZ_CHECK(!result.error().empty(), std::string("a refused file came with no diagnostic"));
    for (const auto& d : result.error()) {
      const std::string shown = d.to_string();
      FUZZ_CHECK(d.where.file == kFile, "diagnostic names another file: " + shown);
      FUZZ_CHECK(d.where.line >= 1, "diagnostic without a line: " + shown);
      FUZZ_CHECK(d.where.column >= 1, "diagnostic without a column: " + shown);
      FUZZ_CHECK(!d.message.empty(), "diagnostic without a message: " + shown);
      FUZZ_CHECK(secret_in_text || shown.find(kSecret) == std::string::npos,
                 "a diagnostic shows an environment value: " + shown);
    }
  } else {
    const std::string summary = ratchet::config::summarize(**result);
    FUZZ_CHECK(secret_in_text || summary.find(kSecret) == std::string::npos,
               "the summary shows an environment value: " + summary);
  }
  auto again = ratchet::config::load_string(text, file, env);
  FUZZ_CHECK(outcome(result) == outcome(again),
             "two loads of the same text differ:\n" + outcome(result) + "\n---\n" + outcome(again));
  return 0;
}

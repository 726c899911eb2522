// Masking of secrets (the ${NAME} values of a config) in any text the engine
// prints, logs, stores or hands to a plugin from a server; and of the
// arguments a job type redacts, in what is shown of its jobs.
//
// A secret is found wherever it stands, inside longer text too, in every
// form it takes on its way through URLs, JSON and headers:
//   - as is;
//   - percent-encoded, byte by byte or only in part, with upper- or
//     lower-case hex digits, encoded twice ("%253D"), and "+" for a space;
//   - JSON-escaped ("\"", "\\", "\/", "\n", "\u0041", ...);
//   - HTML-escaped, byte by byte or only in part ("&amp;", "&#38;",
//     "&#x26;"), as a server's error page echoes what it was sent;
//   - as hex digits, all lower or all upper case;
//   - as the "?" printable_prefix() makes of an unprintable byte;
//   - base64 (standard or URL alphabet) at any of the three alignments it
//     can have inside longer encoded data, as in "Basic base64(user:KEY)":
//     then the whole base64 run holding it is masked, so no bits of it are
//     left at either edge.
// Each place is replaced by "***". Secrets shorter than kMinLength are
// left alone: three characters say too little to be worth hiding and would
// mask ordinary words.
//
// Mask before cutting text to a length: a cut through a secret leaves a part
// of it that no longer matches.
//
// Ownership: a SecretMask holds copies of its secrets.
// Thread-safety: const methods may be called from many threads at once.
#pragma once

#include <cstddef>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

namespace ratchet::common {

class SecretMask {
 public:
  static constexpr std::size_t kMinLength = 4;
  static constexpr std::string_view kMask = "***";

  SecretMask() = default;
  // Secrets shorter than kMinLength and repeats are dropped.
  explicit SecretMask(const std::vector<std::string>& secrets);

  // `text` with every place that holds a secret replaced by kMask.
  std::string mask(std::string_view text) const;
  // Whether `text` holds a secret in any of the forms above.
  bool holds_secret(std::string_view text) const;
  // Every string of `value` (object keys too) masked; the JSON stays valid.
  nlohmann::json mask_json(const nlohmann::json& value) const;

  bool empty() const noexcept { return entries_.empty(); }

 private:
  struct Entry {
    std::string secret;
    bool starts[256] = {};            // first bytes an encoded form of the secret can begin with
    std::vector<std::string> base64;  // the parts of its encodings that do not depend on neighbours
    std::vector<std::string> hex;     // its hex digits, lower and upper case
  };
  using Range = std::pair<std::size_t, std::size_t>;  // [begin, end)

  std::vector<Range> find(std::string_view text) const;

  std::vector<Entry> entries_;
};

// Replaces every secret in `text` (in every form above) by "***".
std::string mask_secrets(std::string_view text, const std::vector<std::string>& secrets);

}  // namespace ratchet::common

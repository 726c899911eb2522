// The dashboard's files (assets/), compiled into the binary so that the
// command serves them with nothing installed beside it.
#pragma once

#include <optional>
#include <string_view>

namespace ratchet::cli::web {

struct Asset {
  std::string_view content_type;
  std::string_view body;
};

// The file served at `path` ("/" is index.html); nullopt for any other.
std::optional<Asset> find_asset(std::string_view path);

}  // namespace ratchet::cli::web

#include "ratchet/version.hpp"

namespace ratchet {

std::string_view version() noexcept { return kHeaderVersion; }

}  // namespace ratchet

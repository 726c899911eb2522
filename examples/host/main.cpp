// The smallest program that embeds ratchet: it links libratchet through
// find_package(ratchet) and checks that the headers and the library agree.
#include <cstdio>

#include "ratchet/version.hpp"

int main() {
  if (ratchet::version() != ratchet::kHeaderVersion) {
    std::fprintf(stderr, "headers are ratchet %.*s but the library is %.*s\n",
                 static_cast<int>(ratchet::kHeaderVersion.size()), ratchet::kHeaderVersion.data(),
                 static_cast<int>(ratchet::version().size()), ratchet::version().data());
    return 1;
  }
  std::printf("embedded ratchet %.*s\n", static_cast<int>(ratchet::version().size()),
              ratchet::version().data());
  return 0;
}

// A number with a fixed count of decimals, as the benchmarks' tables print it.
#pragma once

#include <iomanip>
#include <sstream>
#include <string>

namespace ratchet::bench {

inline std::string fixed(double v, int decimals) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(decimals) << v;
  return out.str();
}

}  // namespace ratchet::bench

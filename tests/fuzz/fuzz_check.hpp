// What every fuzz harness in this folder shares: FUZZ_CHECK, which stops the
// process when an invariant does not hold. Under afl-fuzz the abort is a
// crash the fuzzer saves; in the replay tests it fails the test and names
// the broken invariant.
#pragma once

#include <cstdio>
#include <cstdlib>
#include <string>

namespace ratchet::fuzz {

[[noreturn]] inline void invariant_failed(const char* file, int line, const char* what,
                                          const std::string& detail) {
  std::fprintf(stderr, "%s:%d: invariant failed: %s\n  %s\n", file, line, what, detail.c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace ratchet::fuzz

// FUZZ_CHECK(condition, detail): detail is a std::string built only on failure.
#define FUZZ_CHECK(cond, detail)                                                         \
  do {                                                                                   \
    if (!(cond)) ::ratchet::fuzz::invariant_failed(__FILE__, __LINE__, #cond, (detail)); \
  } while (false)

// One fuzz target per parser a daemon or the command line runs on input a user controls.
// Each file defines LLVMFuzzerTestOneInput; it is linked either with libFuzzer (bench/fuzz,
// clang) or with replay_main.cc, which runs a saved corpus as a regression test (ctest).
// A target aborts only when a parser breaks a promise (a round trip that does not hold);
// refusing input with an error is the expected outcome for most inputs.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <string_view>

#define CORRAL_FUZZ_CHECK(cond)                                                          \
  do {                                                                                   \
    if (!(cond)) {                                                                       \
      std::fprintf(stderr, "%s:%d: fuzz check failed: %s\n", __FILE__, __LINE__, #cond); \
      std::abort();                                                                      \
    }                                                                                    \
  } while (0)

inline std::string_view fuzz_text(const uint8_t* data, size_t size) {
  return {reinterpret_cast<const char*>(data), size};
}

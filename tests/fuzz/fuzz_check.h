// FUZZ_CHECK: an invariant a fuzz target asserts about a decoder's output. A violation prints
// the condition and aborts, which libFuzzer reports as a crash (and the replay test as a
// failure), like any memory error the sanitizers find.
#ifndef SPLITSPEC_TESTS_FUZZ_FUZZ_CHECK_H_
#define SPLITSPEC_TESTS_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define FUZZ_CHECK(condition)                                                                 \
  do {                                                                                        \
    if (!(condition)) {                                                                       \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK failed: %s\n", __FILE__, __LINE__, #condition); \
      std::abort();                                                                           \
    }                                                                                         \
  } while (0)

// FUZZ_CHECK for an absl::Status or StatusOr that must be OK; prints the error.
#define FUZZ_CHECK_OK(status_or)                                                                \
  do {                                                                                          \
    if (!(status_or).ok()) {                                                                    \
      std::fprintf(stderr, "%s:%d: FUZZ_CHECK_OK failed: %s: %s\n", __FILE__, __LINE__, #status_or, \
                   ::splitspec::fuzz::StatusText(status_or).c_str());                          \
      std::abort();                                                                             \
    }                                                                                           \
  } while (0)

namespace splitspec::fuzz {
inline std::string StatusText(const absl::Status& status) { return status.ToString(); }
template <typename T>
std::string StatusText(const absl::StatusOr<T>& status_or) {
  return status_or.status().ToString();
}
}  // namespace splitspec::fuzz

#endif  // SPLITSPEC_TESTS_FUZZ_FUZZ_CHECK_H_

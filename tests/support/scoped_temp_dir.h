// Temporary directories for tests, always removed: one helper for every test binary, so test
// runs stop leaving directories behind in /tmp. Header-only, so any test folder can use it
// whatever SPLITSPEC_TEST_FILTER builds. No gtest dependency (test helpers that are not tests,
// e.g. the integration cluster, use it too).
//
//   ScopedTempDir dir("model_io_");          // <root>/model_io_XXXXXX, removed at scope end
//   ProcessTempDir("engine_tiny_")           // <root>/engine_tiny_XXXXXX, one per process and
//                                            // prefix, removed when the test binary exits
//
// <root> is $TEST_TMPDIR when set, else the system's temporary directory. A binary that crashes
// or is killed (a ctest timeout) still leaves its directories behind: nothing runs then.
#ifndef SPLITSPEC_TESTS_SUPPORT_SCOPED_TEMP_DIR_H_
#define SPLITSPEC_TESTS_SUPPORT_SCOPED_TEMP_DIR_H_

#include <stdlib.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <system_error>
#include <utility>

namespace splitspec::testing {

// $TEST_TMPDIR, else the system temporary directory.
inline std::string TestTempRoot() {
  const char* env = std::getenv("TEST_TMPDIR");
  if (env != nullptr && env[0] != '\0') return env;
  std::error_code ec;
  const std::filesystem::path system = std::filesystem::temp_directory_path(ec);
  return ec ? std::string("/tmp") : system.string();
}

// A fresh, empty directory <root>/<prefix>XXXXXX, removed with everything in it by the
// destructor. Aborts (with the reason) when it cannot be created: every test using it would
// fail in confusing ways otherwise. Thread-safe to create concurrently.
class ScopedTempDir {
 public:
  explicit ScopedTempDir(const std::string& prefix = "splitspec_test_") {
    std::string pattern = TestTempRoot() + "/" + prefix + "XXXXXX";
    if (mkdtemp(pattern.data()) == nullptr) {
      std::perror(("ScopedTempDir: mkdtemp " + pattern).c_str());
      std::abort();
    }
    path_ = std::move(pattern);
  }
  ~ScopedTempDir() {
    std::error_code ignored;
    std::filesystem::remove_all(path_, ignored);
  }
  ScopedTempDir(const ScopedTempDir&) = delete;
  ScopedTempDir& operator=(const ScopedTempDir&) = delete;

  const std::string& path() const { return path_; }
  // path() + "/" + name (nothing is created).
  std::string Join(const std::string& name) const { return path_ + "/" + name; }

 private:
  std::string path_;
};

namespace internal {

// The process's directories by prefix; removed by an atexit handler registered on first use.
// Leaked on purpose: static destructors and atexit handlers run in an order we do not control.
// Each directory remembers the process that made it: a forked child that calls exit() must not
// remove its parent's directories.
struct ProcessTempDirs {
  struct Entry {
    pid_t owner = 0;
    std::unique_ptr<ScopedTempDir> dir;
  };
  std::mutex mu;
  std::map<std::string, Entry> by_prefix;
};

inline ProcessTempDirs& GetProcessTempDirs() {
  static ProcessTempDirs* dirs = [] {
    auto* created = new ProcessTempDirs();
    std::atexit([] {
      ProcessTempDirs& all = GetProcessTempDirs();
      std::lock_guard<std::mutex> lock(all.mu);
      for (auto& [prefix, entry] : all.by_prefix) {
        if (entry.owner != getpid()) (void)entry.dir.release();  // the parent's: leave it alone
      }
      all.by_prefix.clear();  // each ScopedTempDir removes its directory
    });
    return created;
  }();
  return *dirs;
}

}  // namespace internal

// The directory <root>/<prefix>XXXXXX of this process for `prefix`, made on the first call and
// returned by every later one; removed with its contents when the process exits normally. For
// files that tests share for the whole run (random models made once per binary). Thread-safe.
inline const std::string& ProcessTempDir(const std::string& prefix) {
  using internal::ProcessTempDirs;
  ProcessTempDirs& dirs = internal::GetProcessTempDirs();
  std::lock_guard<std::mutex> lock(dirs.mu);
  ProcessTempDirs::Entry& entry = dirs.by_prefix[prefix];
  if (entry.dir == nullptr) {
    entry.dir = std::make_unique<ScopedTempDir>(prefix);
    entry.owner = getpid();
  }
  return entry.dir->path();
}

}  // namespace splitspec::testing

#endif  // SPLITSPEC_TESTS_SUPPORT_SCOPED_TEMP_DIR_H_

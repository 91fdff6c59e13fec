// Reference packages from the npm registry for tests: installed once into a cache directory
// under the build tree (install.sh beside this file), then run with node.
#ifndef SPLITSPEC_TESTS_REFERENCE_NPM_NPM_CACHE_H_
#define SPLITSPEC_TESTS_REFERENCE_NPM_NPM_CACHE_H_

#include <sys/wait.h>

#include <array>
#include <cstdio>
#include <string>
#include <vector>

namespace splitspec::testing {

struct CommandResult {
  int exit_code = -1;
  std::string output;  // stdout and stderr together
};

inline CommandResult RunShell(const std::string& command) {
  CommandResult result;
  FILE* pipe = popen((command + " 2>&1").c_str(), "r");
  if (pipe == nullptr) return result;
  std::array<char, 4096> buffer;
  size_t n = 0;
  while ((n = fread(buffer.data(), 1, buffer.size(), pipe)) > 0) result.output.append(buffer.data(), n);
  const int status = pclose(pipe);
  result.exit_code = WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  return result;
}

// Outcome of installing packages: ok, skip (registry unreachable: `reason` says so) or a failure.
struct NpmInstall {
  bool ok = false;
  bool skip = false;
  std::string reason;
};

// Installs `packages` into `cache_dir` with install.sh (a no-op when they are there already).
inline NpmInstall InstallNpmPackages(const std::string& install_script, const std::string& cache_dir,
                                     const std::vector<std::string>& packages) {
  std::string command = "bash '" + install_script + "' '" + cache_dir + "'";
  for (const std::string& p : packages) command += " '" + p + "'";
  const CommandResult r = RunShell(command);
  NpmInstall out;
  out.ok = r.exit_code == 0;
  out.skip = r.exit_code == 77;
  out.reason = r.output;
  return out;
}

}  // namespace splitspec::testing

#endif  // SPLITSPEC_TESTS_REFERENCE_NPM_NPM_CACHE_H_

// Subcommands of the `splitspec` CLI register themselves here; the tiny argument parser keeps
// each subcommand's flags local (absl flags are process-global and would collide).
#ifndef SPLITSPEC_TOOLS_COMMAND_H_
#define SPLITSPEC_TOOLS_COMMAND_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

namespace splitspec::tools {

// Parses `--name value`, `--name=value` and bare `--flag` arguments.
class Args {
 public:
  Args(int argc, char** argv);  // argv[0] is the subcommand name

  bool Has(const std::string& name) const;
  std::string GetString(const std::string& name, const std::string& fallback = "") const;
  // Exits with a message when present but not a number.
  long long GetInt(const std::string& name, long long fallback) const;
  // An unsigned 64-bit value (seeds: every value ChooseSeed prints must be accepted back).
  uint64_t GetUint64(const std::string& name, uint64_t fallback) const;
  // GetInt, and exits with a message naming the flag and [min, max] when outside them.
  long long GetIntInRange(const std::string& name, long long fallback, long long min, long long max) const;
  double GetDouble(const std::string& name, double fallback) const;
  // "1,8,32" -> {1, 8, 32}; `fallback` when absent. Exits with a message naming the flag when
  // an item is not a positive integer.
  std::vector<int> GetPositiveIntList(const std::string& name, const std::string& fallback) const;
  // Exits with a usage error naming the flag when absent.
  std::string Require(const std::string& name) const;
  // Flags given but never read by the command (typos): reported by CheckAllUsed.
  void CheckAllUsed() const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::map<std::string, std::string> values_;
  std::vector<std::string> positional_;
  mutable std::map<std::string, bool> used_;
};

struct Command {
  std::string name;
  std::string summary;  // one line, for `splitspec --help`
  std::string usage;    // `splitspec NAME --help`: the flags, one a line
  std::function<int(const Args&)> run;
};

std::map<std::string, Command>& CommandRegistry();

struct RegisterCommand {
  RegisterCommand(std::string name, std::string summary, std::string usage, std::function<int(const Args&)> run) {
    CommandRegistry()[name] = Command{name, std::move(summary), std::move(usage), std::move(run)};
  }
  // A command without its own flag list: `--help` prints the summary.
  RegisterCommand(std::string name, std::string summary, std::function<int(const Args&)> run)
      : RegisterCommand(name, summary, "", std::move(run)) {}
};

}  // namespace splitspec::tools

#endif  // SPLITSPEC_TOOLS_COMMAND_H_

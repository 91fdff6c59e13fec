// Command-line flags for the service binaries: `--name value`, `--name=value`, bare `--flag`,
// repeatable flags (`--drafter a --drafter b`), dashes in names as the docs spell them
// (`--ngram-min`). absl flags would force underscores and cannot repeat a flag.
//
// Not thread-safe; parse once in main.
#ifndef SPLITSPEC_COMMON_RPC_FLAGS_H_
#define SPLITSPEC_COMMON_RPC_FLAGS_H_

#include <map>
#include <set>
#include <string>
#include <vector>

#include "absl/status/statusor.h"

namespace splitspec::rpc {

// True when the command line asks for the usage (`--help` or `-h` anywhere): a binary prints its
// usage on stdout and exits 0 before reading any other flag, so `--help` never needs a value.
bool HelpRequested(int argc, char** argv);

class Flags {
 public:
  // `boolean` names take no value (`--ngram`); every other flag needs one. INVALID_ARGUMENT
  // for positional arguments or a missing value.
  static absl::StatusOr<Flags> Parse(int argc, char** argv, const std::set<std::string>& boolean);

  bool Has(const std::string& name) const;
  std::string GetString(const std::string& name, const std::string& fallback = "") const;
  std::vector<std::string> GetAll(const std::string& name) const;
  // INVALID_ARGUMENT naming the flag when the value is not a number: for GetInt, also one an int
  // cannot hold (a silent wrap would turn --port 70000 into port 4464); for GetDouble, NaN, which
  // no flag has a meaning for and which every range check would let through.
  absl::StatusOr<int> GetInt(const std::string& name, int fallback) const;
  absl::StatusOr<double> GetDouble(const std::string& name, double fallback) const;
  // GetInt, and INVALID_ARGUMENT naming the flag, [min, max] and the value when outside them
  // (max = INT_MAX: "at least min").
  absl::StatusOr<int> GetIntInRange(const std::string& name, int fallback, int min, int max) const;
  // GetDouble, and INVALID_ARGUMENT naming the flag and the value when it is below `min`.
  absl::StatusOr<double> GetDoubleAtLeast(const std::string& name, double fallback, double min) const;
  // A switch given as "on" or "off"; INVALID_ARGUMENT naming the flag for anything else.
  absl::StatusOr<bool> GetOnOff(const std::string& name, bool fallback) const;
  // INVALID_ARGUMENT listing flags that were given but never read (typos), so call it last.
  absl::Status CheckAllUsed() const;

 private:
  std::map<std::string, std::vector<std::string>> values_;
  mutable std::set<std::string> used_;
};

}  // namespace splitspec::rpc

#endif  // SPLITSPEC_COMMON_RPC_FLAGS_H_

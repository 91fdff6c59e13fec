// Service command-line flags (see flags.h).
#include "common/rpc/flags.h"

#include <cerrno>
#include <climits>
#include <cmath>
#include <cstdlib>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace splitspec::rpc {

bool HelpRequested(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--help" || arg == "-h") return true;
  }
  return false;
}

absl::StatusOr<Flags> Flags::Parse(int argc, char** argv, const std::set<std::string>& boolean) {
  Flags flags;
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0 || arg.size() == 2) {
      return absl::InvalidArgumentError(absl::StrCat("unexpected argument '", arg, "'"));
    }
    arg = arg.substr(2);
    const size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      flags.values_[arg.substr(0, eq)].push_back(arg.substr(eq + 1));
    } else if (boolean.count(arg)) {
      flags.values_[arg].push_back("true");
    } else if (i + 1 < argc) {
      flags.values_[arg].push_back(argv[++i]);
    } else {
      return absl::InvalidArgumentError(absl::StrCat("--", arg, " needs a value"));
    }
  }
  return flags;
}

bool Flags::Has(const std::string& name) const {
  used_.insert(name);
  return values_.count(name) > 0;
}

std::string Flags::GetString(const std::string& name, const std::string& fallback) const {
  used_.insert(name);
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second.back();
}

std::vector<std::string> Flags::GetAll(const std::string& name) const {
  used_.insert(name);
  auto it = values_.find(name);
  return it == values_.end() ? std::vector<std::string>() : it->second;
}

absl::StatusOr<int> Flags::GetInt(const std::string& name, int fallback) const {
  if (!Has(name)) return fallback;
  const std::string value = GetString(name);
  char* end = nullptr;
  errno = 0;
  const long long parsed = std::strtoll(value.c_str(), &end, 10);
  if (value.empty() || *end != '\0') {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " expects an integer, got '", value, "'"));
  }
  if (errno == ERANGE || parsed < INT_MIN || parsed > INT_MAX) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " is out of range, got ", value));
  }
  return static_cast<int>(parsed);
}

absl::StatusOr<int> Flags::GetIntInRange(const std::string& name, int fallback, int min, int max) const {
  absl::StatusOr<int> value = GetInt(name, fallback);
  if (value.ok() && (*value < min || *value > max)) {
    if (max == INT_MAX) {
      return absl::InvalidArgumentError(absl::StrCat("--", name, " must be at least ", min, ", got ", *value));
    }
    return absl::InvalidArgumentError(absl::StrCat("--", name, " must be in [", min, ", ", max, "], got ", *value));
  }
  return value;
}

absl::StatusOr<double> Flags::GetDouble(const std::string& name, double fallback) const {
  if (!Has(name)) return fallback;
  const std::string value = GetString(name);
  char* end = nullptr;
  const double parsed = std::strtod(value.c_str(), &end);
  if (value.empty() || *end != '\0' || std::isnan(parsed)) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " expects a number, got '", value, "'"));
  }
  return parsed;
}

absl::StatusOr<double> Flags::GetDoubleAtLeast(const std::string& name, double fallback, double min) const {
  absl::StatusOr<double> value = GetDouble(name, fallback);
  if (value.ok() && *value < min) {
    return absl::InvalidArgumentError(absl::StrCat("--", name, " must be at least ", min, ", got ", *value));
  }
  return value;
}

absl::StatusOr<bool> Flags::GetOnOff(const std::string& name, bool fallback) const {
  if (!Has(name)) return fallback;
  const std::string value = GetString(name);
  if (value == "on") return true;
  if (value == "off") return false;
  return absl::InvalidArgumentError(absl::StrCat("--", name, " expects on or off, got '", value, "'"));
}

absl::Status Flags::CheckAllUsed() const {
  std::vector<std::string> unknown;
  for (const auto& [name, values] : values_) {
    if (!used_.count(name)) unknown.push_back("--" + name);
  }
  if (unknown.empty()) return absl::OkStatus();
  return absl::InvalidArgumentError(absl::StrCat("unknown flag(s): ", absl::StrJoin(unknown, ", ")));
}

}  // namespace splitspec::rpc

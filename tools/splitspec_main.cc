// `splitspec SUBCOMMAND [flags]`: dispatches to the subcommands registered in tools/cmd_*.cc.
#include <cerrno>
#include <cstdio>
#include <cstdlib>
#include <string>

#include "tools/command.h"

namespace splitspec::tools {

Args::Args(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg.rfind("--", 0) != 0) {
      positional_.push_back(arg);
      continue;
    }
    arg = arg.substr(2);
    const size_t eq = arg.find('=');
    if (eq != std::string::npos) {
      values_[arg.substr(0, eq)] = arg.substr(eq + 1);
    } else if (i + 1 < argc && std::string(argv[i + 1]).rfind("--", 0) != 0) {
      values_[arg] = argv[++i];
    } else {
      values_[arg] = "";
    }
  }
}

bool Args::Has(const std::string& name) const {
  used_[name] = true;
  return values_.count(name) > 0;
}

std::string Args::GetString(const std::string& name, const std::string& fallback) const {
  used_[name] = true;
  auto it = values_.find(name);
  return it == values_.end() ? fallback : it->second;
}

long long Args::GetInt(const std::string& name, long long fallback) const {
  const std::string value = GetString(name);
  if (value.empty()) return fallback;
  char* end = nullptr;
  errno = 0;
  const long long parsed = std::strtoll(value.c_str(), &end, 10);
  if (*end != '\0' || errno == ERANGE) {
    std::fprintf(stderr, "error: --%s expects an integer, got '%s'\n", name.c_str(), value.c_str());
    std::exit(2);
  }
  return parsed;
}

uint64_t Args::GetUint64(const std::string& name, uint64_t fallback) const {
  const std::string value = GetString(name);
  if (value.empty()) return fallback;
  errno = 0;
  // strtoull takes "-1" as 2^64 - 1: only digits are a number here.
  const unsigned long long parsed = std::strtoull(value.c_str(), nullptr, 10);
  if (value.find_first_not_of("0123456789") != std::string::npos || errno == ERANGE) {
    std::fprintf(stderr, "error: --%s expects an integer in [0, 2^64), got '%s'\n", name.c_str(), value.c_str());
    std::exit(2);
  }
  return parsed;
}

long long Args::GetIntInRange(const std::string& name, long long fallback, long long min, long long max) const {
  const long long value = GetInt(name, fallback);
  if (value < min || value > max) {
    std::fprintf(stderr, "error: --%s must be in [%lld, %lld], got %lld\n", name.c_str(), min, max, value);
    std::exit(2);
  }
  return value;
}

std::vector<int> Args::GetPositiveIntList(const std::string& name, const std::string& fallback) const {
  const std::string value = Has(name) ? GetString(name) : fallback;
  std::vector<int> list;
  const char* p = value.c_str();
  while (*p != '\0') {
    char* end = nullptr;
    const long long parsed = std::strtoll(p, &end, 10);
    if (end == p || parsed <= 0 || parsed > 1 << 20 || (*end != ',' && *end != '\0')) {
      std::fprintf(stderr, "error: --%s expects positive integers separated by commas, got '%s'\n", name.c_str(),
                   value.c_str());
      std::exit(2);
    }
    list.push_back(static_cast<int>(parsed));
    p = *end == ',' ? end + 1 : end;
  }
  if (list.empty()) {
    std::fprintf(stderr, "error: --%s expects at least one positive integer\n", name.c_str());
    std::exit(2);
  }
  return list;
}

double Args::GetDouble(const std::string& name, double fallback) const {
  const std::string value = GetString(name);
  if (value.empty()) return fallback;
  char* end = nullptr;
  const double parsed = std::strtod(value.c_str(), &end);
  if (*end != '\0') {
    std::fprintf(stderr, "error: --%s expects a number, got '%s'\n", name.c_str(), value.c_str());
    std::exit(2);
  }
  return parsed;
}

std::string Args::Require(const std::string& name) const {
  if (!Has(name) || GetString(name).empty()) {
    std::fprintf(stderr, "error: --%s is required\n", name.c_str());
    std::exit(2);
  }
  return GetString(name);
}

void Args::CheckAllUsed() const {
  bool bad = false;
  for (const auto& [name, value] : values_) {
    if (!used_.count(name)) {
      std::fprintf(stderr, "error: unknown flag --%s\n", name.c_str());
      bad = true;
    }
  }
  if (bad) std::exit(2);
}

std::map<std::string, Command>& CommandRegistry() {
  static auto* registry = new std::map<std::string, Command>();
  return *registry;
}

}  // namespace splitspec::tools

namespace {

bool IsHelpFlag(const std::string& arg) { return arg == "--help" || arg == "-h"; }

void PrintCommandList(std::FILE* out) {
  std::fprintf(out, "usage: splitspec COMMAND [flags]   (splitspec COMMAND --help for its flags)\n\ncommands:\n");
  for (const auto& [name, command] : splitspec::tools::CommandRegistry()) {
    std::fprintf(out, "  %-16s %s\n", name.c_str(), command.summary.c_str());
  }
}

void PrintCommandUsage(const splitspec::tools::Command& command) {
  std::printf("usage: splitspec %s [flags]\n\n%s\n", command.name.c_str(), command.summary.c_str());
  if (!command.usage.empty()) std::printf("\n%s", command.usage.c_str());
  std::printf("  --%-24s print this help and exit\n", "help");
}

}  // namespace

int main(int argc, char** argv) {
  using splitspec::tools::CommandRegistry;
  if (argc >= 2 && (IsHelpFlag(argv[1]) || std::string(argv[1]) == "help")) {
    PrintCommandList(stdout);
    return 0;
  }
  if (argc < 2 || !CommandRegistry().count(argv[1])) {
    PrintCommandList(stderr);
    if (argc >= 2) std::fprintf(stderr, "\nunknown command '%s'\n", argv[1]);
    return 2;
  }
  const splitspec::tools::Command& command = CommandRegistry()[argv[1]];
  for (int i = 2; i < argc; ++i) {
    if (IsHelpFlag(argv[i])) {
      PrintCommandUsage(command);
      return 0;
    }
  }
  const splitspec::tools::Args args(argc - 1, argv + 1);
  return command.run(args);
}

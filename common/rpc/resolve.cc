// Replica discovery by DNS (see resolve.h).
#include "common/rpc/resolve.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <sys/socket.h>

#include <algorithm>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace splitspec::rpc {

absl::StatusOr<std::pair<std::string, int>> SplitHostPort(const std::string& address) {
  std::string rest = absl::StartsWith(address, "dns:///") ? address.substr(7) : address;
  const size_t colon = rest.rfind(':');
  int port = 0;
  if (absl::StartsWith(address, "unix:") || colon == std::string::npos || colon == 0 ||
      !absl::SimpleAtoi(rest.substr(colon + 1), &port) || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("'", address, "' is not HOST:PORT"));
  }
  std::string host = rest.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  return std::make_pair(host, port);
}

bool IsDnsTarget(const std::string& target) { return absl::StartsWith(target, "dns:///"); }

absl::StatusOr<std::vector<std::string>> ResolveAddresses(const std::string& target) {
  if (!IsDnsTarget(target)) return std::vector<std::string>{target};
  absl::StatusOr<std::pair<std::string, int>> host_port = SplitHostPort(target);
  if (!host_port.ok()) return absl::InvalidArgumentError(absl::StrCat("'", target, "': expected dns:///HOST:PORT"));
  const std::string& host = host_port->first;
  const std::string port = std::to_string(host_port->second);
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* found = nullptr;
  if (const int error = getaddrinfo(host.c_str(), port.c_str(), &hints, &found); error != 0) {
    return absl::UnavailableError(absl::StrCat("cannot resolve ", host, ": ", gai_strerror(error)));
  }
  std::vector<std::string> addresses;
  for (const addrinfo* a = found; a != nullptr; a = a->ai_next) {
    char text[INET6_ADDRSTRLEN] = {};
    if (a->ai_family == AF_INET) {
      inet_ntop(AF_INET, &reinterpret_cast<const sockaddr_in*>(a->ai_addr)->sin_addr, text, sizeof(text));
      addresses.push_back(absl::StrCat(text, ":", port));
    } else if (a->ai_family == AF_INET6) {
      inet_ntop(AF_INET6, &reinterpret_cast<const sockaddr_in6*>(a->ai_addr)->sin6_addr, text, sizeof(text));
      addresses.push_back(absl::StrCat("[", text, "]:", port));
    }
  }
  freeaddrinfo(found);
  std::sort(addresses.begin(), addresses.end());
  addresses.erase(std::unique(addresses.begin(), addresses.end()), addresses.end());
  if (addresses.empty()) return absl::UnavailableError(absl::StrCat(host, " has no address"));
  return addresses;
}

}  // namespace splitspec::rpc

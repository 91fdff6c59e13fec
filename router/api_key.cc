// Bearer key check (see api_key.h).
#include "router/api_key.h"

#include "absl/strings/match.h"

namespace splitspec::router {

bool ApiKeyAccepts(absl::string_view api_key, absl::string_view authorization) {
  if (api_key.empty()) return true;
  constexpr absl::string_view kScheme = "Bearer ";
  if (!absl::StartsWithIgnoreCase(authorization, kScheme)) return false;
  const absl::string_view offered = authorization.substr(kScheme.size());
  // A length mismatch ends early: the length of the key is not the secret, its bytes are.
  if (offered.size() != api_key.size()) return false;
  unsigned char difference = 0;
  for (size_t i = 0; i < api_key.size(); ++i) {
    difference |= static_cast<unsigned char>(offered[i] ^ api_key[i]);
  }
  return difference == 0;
}

}  // namespace splitspec::router

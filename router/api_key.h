// The router's bearer key for its public APIs (gRPC `authorization` metadata and the OpenAI HTTP
// API's `Authorization` header share it): one check, so both accept exactly the same values.
#ifndef SPLITSPEC_ROUTER_API_KEY_H_
#define SPLITSPEC_ROUTER_API_KEY_H_

#include "absl/strings/string_view.h"

namespace splitspec::router {

// True when `api_key` is empty (the API is open) or `authorization` is "Bearer <api_key>" (the
// scheme in any case, RFC 6750). The key is compared in time that does not depend on where the
// first wrong byte is, so timing says nothing of the key.
bool ApiKeyAccepts(absl::string_view api_key, absl::string_view authorization);

}  // namespace splitspec::router

#endif  // SPLITSPEC_ROUTER_API_KEY_H_

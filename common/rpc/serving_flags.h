// The security and exposure flags every worker binary shares: mutual TLS, a plaintext
// health-only port and reflection. (The verifier adds --expose-model-path itself.)
//
//   --tls-cert FILE --tls-key FILE --tls-client-ca FILE   require client certificates from CA
//   --tls-reload-seconds S                                how often the files are read again (60)
//   --health-port P                                       plaintext grpc.health.v1 only (-1 off)
//   --enable-reflection                                   gRPC server reflection (off)
//   --step-spin-us US                                     poll for the next step request from US before
//                                                         to US after it is due (300; 0 = always sleep)
//   --step-port P                                         with a TCP address, Verify / Propose on a step
//                                                         socket at this TCP port (0 = a free one; -1 off)
#ifndef SPLITSPEC_COMMON_RPC_SERVING_FLAGS_H_
#define SPLITSPEC_COMMON_RPC_SERVING_FLAGS_H_

#include <set>
#include <string>

#include "absl/status/statusor.h"
#include "common/rpc/flags.h"
#include "common/rpc/server.h"
#include "common/rpc/spin_window.h"

namespace splitspec::rpc {

// Upper bounds of the worker binaries' size flags: far above any use, low enough that a typo is a
// usage error at once rather than a thread team or an allocation that cannot succeed.
inline constexpr int kMaxWorkerThreads = 4096;     // --threads
inline constexpr int kMaxDraftTokensFlag = 4096;   // --max-draft-tokens (chain length or tree nodes)
inline constexpr int kMaxKvBlockSize = 4096;       // --block-size (tokens per KV-cache block)
inline constexpr int kMaxInProcessTpRanks = 1024;  // the verifier's --tp

struct WorkerServing {
  TlsFiles tls;
  int health_port = -1;
  bool reflection = false;
  // The workers' --step-socket on|off (read by their mains: the router serves no step socket).
  bool step_socket = true;
  // How long a step socket connection polls for the next request after answering one.
  absl::Duration step_spin = absl::Microseconds(kDefaultStepSpinMicros);
  // With a TCP address: the step socket's TCP port (0 = a free one, -1 = none).
  int step_port = -1;

  // Copies the serving choices into server options.
  void ApplyTo(ServerOptions* options) const {
    options->tls = tls;
    options->health_port = health_port;
    options->reflection = reflection;
    options->step_socket = step_socket;
    options->step_spin = step_spin;
    options->step_port = step_port;
  }
  // "plaintext" or "mutual TLS", plus the health port: for the startup line.
  std::string Describe() const;
};

// The boolean flags among them, for Flags::Parse.
const std::set<std::string>& WorkerServingBooleanFlags();
// --step-spin-us (router and workers): INVALID_ARGUMENT outside 0..100000 us.
absl::StatusOr<absl::Duration> ParseStepSpin(const Flags& flags);
// INVALID_ARGUMENT for a partial TLS triple, an unreadable or non-PEM file, or a bad port.
absl::StatusOr<WorkerServing> ParseWorkerServing(const Flags& flags);

}  // namespace splitspec::rpc

#endif  // SPLITSPEC_COMMON_RPC_SERVING_FLAGS_H_

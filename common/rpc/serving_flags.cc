// Worker serving flags (see serving_flags.h).
#include "common/rpc/serving_flags.h"

#include "absl/strings/str_cat.h"

namespace splitspec::rpc {

std::string WorkerServing::Describe() const {
  std::string s = tls.enabled() ? "mutual TLS" : "plaintext";
  if (health_port >= 0) absl::StrAppend(&s, ", health on its own port");
  if (step_port >= 0) absl::StrAppend(&s, ", step calls on a TCP port");
  return s;
}

const std::set<std::string>& WorkerServingBooleanFlags() {
  static const auto* names = new std::set<std::string>{"enable-reflection"};
  return *names;
}

absl::StatusOr<absl::Duration> ParseStepSpin(const Flags& flags) {
  absl::StatusOr<int> spin_us = flags.GetInt("step-spin-us", kDefaultStepSpinMicros);
  if (!spin_us.ok()) return spin_us.status();
  if (*spin_us < 0 || *spin_us > 100000) return absl::InvalidArgumentError("--step-spin-us must be 0 to 100000");
  return absl::Microseconds(*spin_us);
}

absl::StatusOr<WorkerServing> ParseWorkerServing(const Flags& flags) {
  WorkerServing serving;
  serving.tls.cert = flags.GetString("tls-cert");
  serving.tls.key = flags.GetString("tls-key");
  serving.tls.ca = flags.GetString("tls-client-ca");
  absl::StatusOr<int> reload = flags.GetInt("tls-reload-seconds", TlsFiles::kDefaultTlsReloadSeconds);
  if (!reload.ok()) return reload.status();
  if (*reload < 1) return absl::InvalidArgumentError("--tls-reload-seconds must be at least 1");
  serving.tls.reload_seconds = *reload;
  if (absl::Status s = ValidateTlsFiles(serving.tls); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--tls-cert/--tls-key/--tls-client-ca: ", s.message()));
  }
  absl::StatusOr<int> health_port = flags.GetInt("health-port", -1);
  if (!health_port.ok()) return health_port.status();
  if (*health_port < -1 || *health_port > 65535) {
    return absl::InvalidArgumentError("--health-port must be a port, 0 (any free one) or -1 (off)");
  }
  serving.health_port = *health_port;
  serving.reflection = flags.Has("enable-reflection");
  absl::StatusOr<absl::Duration> step_spin = ParseStepSpin(flags);
  if (!step_spin.ok()) return step_spin.status();
  serving.step_spin = *step_spin;
  absl::StatusOr<int> step_port = flags.GetInt("step-port", -1);
  if (!step_port.ok()) return step_port.status();
  if (*step_port < -1 || *step_port > 65535) {
    return absl::InvalidArgumentError("--step-port must be a port, 0 (any free one) or -1 (off)");
  }
  if (*step_port >= 0 && serving.tls.enabled()) {
    return absl::InvalidArgumentError("--step-port serves plaintext: not with --tls-cert/--tls-key/--tls-client-ca");
  }
  serving.step_port = *step_port;
  return serving;
}

}  // namespace splitspec::rpc

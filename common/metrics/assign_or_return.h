// Internal to common/metrics: the assign-or-return idiom for absl::StatusOr (Abseil 20220623
// ships no public macro for it). Not for use outside this directory.
#ifndef SPLITSPEC_COMMON_METRICS_ASSIGN_OR_RETURN_H_
#define SPLITSPEC_COMMON_METRICS_ASSIGN_OR_RETURN_H_

#define SPLITSPEC_METRICS_CONCAT_INNER(a, b) a##b
#define SPLITSPEC_METRICS_CONCAT(a, b) SPLITSPEC_METRICS_CONCAT_INNER(a, b)

// lhs = *expr when expr (an absl::StatusOr) is ok; otherwise returns its status.
#define SPLITSPEC_METRICS_ASSIGN_OR_RETURN(lhs, expr) \
  SPLITSPEC_METRICS_ASSIGN_OR_RETURN_IMPL(SPLITSPEC_METRICS_CONCAT(status_or_, __LINE__), lhs, expr)
#define SPLITSPEC_METRICS_ASSIGN_OR_RETURN_IMPL(tmp, lhs, expr) \
  auto tmp = (expr);                                            \
  if (!tmp.ok()) return tmp.status();                           \
  lhs = *std::move(tmp)

#endif  // SPLITSPEC_COMMON_METRICS_ASSIGN_OR_RETURN_H_

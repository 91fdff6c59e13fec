// VerifySlowdown: how much longer the target's verify calls take while drafts are made ahead
// beside them (router_pipeline.cc), learnt from the steps themselves.
//
// The pipeline prices a draft made ahead as free where the verify call hides it. That holds
// only where the drafter does not compete with the verifier: on one GPU that both workers
// share, their kernels take turns, and `static:3` with the pipeline served 16 clients at 0.34x
// of serial drafting on an H200; on a 16-core CPU host the drafting core's memory traffic made
// verify calls 14% slower, and the pipeline lost (0.89x) where drafting was 18% of a serial
// step (docs/benchmarks.md, "The bundled pair on one H200, and on that machine's 16 CPU
// cores").
//
// Each verify call's compute is compared with a prediction for its shape (the latency file's,
// which nothing observed moves: the online refit would follow whichever kind of call most steps
// make), as a log ratio. The machine's own speed wanders over minutes, so a mean over the
// rarer kind's calls, taken hundreds of steps apart, would compare against other minutes. A
// call is compared only with the calls of the other kind right before it: where it follows a
// run of at least kFreshRun of them, the difference between its log ratio and their recent
// mean (decayed by kBaselineForget a call) is one observation of the slowdown's log, and the
// slowdown is exp(the observations' decayed mean) - 1, a memory of about 1 / (1 - kForget)
// observations. RouterCore's probes (RouterOptions::slowdown_probe_steps) make
// them: one step in so many goes against the run. Once kOutlierAfterWeight is seen, one
// observation counts at most kOutlierRatio from the mean either way, so a call that also waited
// for something else moves the estimate by a few per cent. Until kMinWeight the slowdown is
// unknown and taken as 0 (the pipeline as priced without it). Bounded memory: a few numbers.
//
// Thread-safety: thread-compatible (the router's loop thread).
#ifndef SPLITSPEC_ROUTER_VERIFY_SLOWDOWN_H_
#define SPLITSPEC_ROUTER_VERIFY_SLOWDOWN_H_

#include "nlohmann/json.hpp"

namespace splitspec::router {

class VerifySlowdown {
 public:
  static constexpr int kFreshRun = 4;
  static constexpr double kBaselineForget = 0.8;
  static constexpr double kForget = 0.8;
  static constexpr double kMinWeight = 2.4;  // three observations: 1 + 0.8 + 0.64
  static constexpr double kOutlierAfterWeight = 2.4;
  static constexpr double kOutlierRatio = 2.0;
  static constexpr double kMaxExtra = 10.0;

  // One verify call that computed for `observed_seconds` where the latency model predicted
  // `predicted_seconds`, with drafts made ahead beside it or not. Ignored unless both are
  // positive and finite.
  void Observe(bool beside_drafts, double observed_seconds, double predicted_seconds);

  // Seen often enough to use.
  bool known() const { return log_slowdown_.weight >= kMinWeight; }
  // The share a verify call's time grows by with drafts made ahead beside it: 0 while unknown,
  // and never below 0 (drafting beside a call does not speed it up; what looks so is noise) nor
  // above kMaxExtra.
  double Extra() const;
  // What the pipeline's decisions price: Extra() from kPricedFrom up, 0 below. On the 2-core
  // VM of docs/benchmarks.md, with the workers on a core each, it read 0-0.07 in twelve runs and
  // 0.15-0.22 in one in which pipelined steps still decoded 9% faster than serial ones: a
  // slowdown that small is within what single probes and the price of a saved Propose
  // misjudge. Where the workers share one GPU it is about 2.
  static constexpr double kPricedFrom = 0.3;
  double Priced() const {
    const double extra = Extra();
    return extra >= kPricedFrom ? extra : 0.0;
  }
  // For /server_info: the slowdown and the weight of what it was learnt from.
  nlohmann::json Describe() const;

 private:
  // A decayed mean; once it has kOutlierAfterWeight, a value counts at most kOutlierRatio from
  // it (in log terms) either way.
  struct DecayedMean {
    double weighted_sum = 0;
    double weight = 0;
    double Mean() const { return weight > 0 ? weighted_sum / weight : 0.0; }
    void Add(double value, double forget);
  };
  DecayedMean baseline_[2];  // recent log ratios of calls alone [0] and beside drafts [1]
  DecayedMean log_slowdown_;
  bool last_beside_ = false;
  int run_ = 0;  // calls of last_beside_'s kind in a row, up to the last one
};

}  // namespace splitspec::router

#endif  // SPLITSPEC_ROUTER_VERIFY_SLOWDOWN_H_

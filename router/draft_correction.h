// DraftCorrection: what a drafter's Propose calls cost against the profile's line, learnt
// online as an affine map, observed = per_call + scale * line.
//
// The profile prices a draft model's call as the sum of its forwards, each on the line
// T = alpha * n_context + gamma * n_batched + delta. A call also pays for what is not a
// forward: receiving and decoding the request, rolling the draft KV back, reading logits back
// from a GPU and ranking them, encoding the answer. On one H200 with the bundled pair, one
// multiplicative scale learnt from smartspec's mostly depth-1 drafts settled at 2.05x the line,
// and the one learnt from `static:3`'s three-token chains at 1.31x. smartspec then priced
// chains at 2.05x too, and never drafted the chains that paid. On a 2-core CPU the fit below
// finds 0.1-0.2 ms a call (docs/benchmarks.md, "The bundled pair on one H200").
//
// The fit is a weighted least-squares line through (line, observed) pairs, with two kinds of
// pseudo-observations:
//   - an anchor at (0, 0), of a small constant weight kAnchorWeight: while the calls seen all
//     have the same line, the fit goes through the origin and reduces to a scale (observed /
//     line), as the one-parameter correction did; once calls of several depths are seen the
//     per-call time emerges, the anchor too light to pull it far towards 0;
//   - the prior scale at the first call's line, of weight kPriorWeight, which decays with the
//     observations, so the first calls move the scale gradually (about 5% each).
// Observations decay by kForget per call (a memory of about 20 calls), so a machine that
// changes is followed. Once the fit has seen a few calls, a call counts at most kOutlierRatio
// times from its prediction either way: one descheduled call moves predictions by a few
// percent, and a drafter that really became slower is followed over a few dozen calls.
// Bounded memory: five running sums.
//
// Thread-safety: thread-compatible (the router's loop thread).
#ifndef SPLITSPEC_ROUTER_DRAFT_CORRECTION_H_
#define SPLITSPEC_ROUTER_DRAFT_CORRECTION_H_

namespace splitspec::router {

class DraftCorrection {
 public:
  static constexpr double kForget = 0.95;
  static constexpr double kPriorWeight = 19.0;
  static constexpr double kAnchorWeight = 0.05;
  static constexpr double kOutlierRatio = 2.0;
  static constexpr double kOutlierAfterWeight = 5.0;  // decayed observations before that clamp
  // The scale and every observation's ratio to its line stay within these.
  static constexpr double kMinScale = 0.1;
  static constexpr double kMaxScale = 10.0;

  // `prior_scale`: the scale before any call is seen (clamped to [kMinScale, kMaxScale]).
  explicit DraftCorrection(double prior_scale);

  // One call whose line (the profile's forwards, no correction) was `line` seconds and which
  // took `observed`. Ignored unless both are positive and finite.
  void Observe(double line, double observed);

  // The predicted time of a call whose line is `line`: per_call + scale * line, and never below
  // kMinScale * line; 0 for a call with no forward.
  double Predict(double line) const { return Apply(per_call_, scale_, line); }
  // The same for given figures (LatencyModel looks a pool's up once for many predictions).
  static double Apply(double per_call_seconds, double scale, double line);
  double scale() const { return scale_; }
  double per_call_seconds() const { return per_call_; }

 private:
  void Refit();

  double prior_scale_;
  double prior_line_ = 0;    // the first observed line: where the prior's pseudo-observation sits
  double prior_weight_ = 0;  // kPriorWeight once observed, decaying with each observation
  // Decayed sums over the observations: weight, line, line^2, observed, line * observed.
  double w_ = 0, x_ = 0, xx_ = 0, y_ = 0, xy_ = 0;
  double scale_;
  double per_call_ = 0;
};

}  // namespace splitspec::router

#endif  // SPLITSPEC_ROUTER_DRAFT_CORRECTION_H_

// Latency model: JSON I/O, corrected predictions, online correction, least-squares fit.
#include "router/latency_model.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <fstream>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace splitspec::router {
namespace {

constexpr double kScaleEma = 0.1;
constexpr double kMinScale = 0.1;
constexpr double kMaxScale = 10.0;

absl::StatusOr<ForwardCoefficients> ParseForward(const nlohmann::json& j, const std::string& what) {
  if (!j.is_object()) return absl::InvalidArgumentError(what + ": expected an object");
  ForwardCoefficients c;
  for (const char* key : {"alpha", "gamma", "delta"}) {
    if (!j.contains(key) || !j[key].is_number()) {
      return absl::InvalidArgumentError(absl::StrCat(what, ": missing number '", key, "'"));
    }
  }
  c.alpha = j["alpha"].get<double>();
  c.gamma = j["gamma"].get<double>();
  c.delta = j["delta"].get<double>();
  if (!(c.alpha >= 0 && c.gamma >= 0 && c.delta >= 0)) {
    return absl::InvalidArgumentError(what + ": coefficients must be finite and >= 0");
  }
  return c;
}

nlohmann::json ForwardToJson(const ForwardCoefficients& c) {
  return {{"alpha", c.alpha}, {"gamma", c.gamma}, {"delta", c.delta}};
}

nlohmann::json BatchFactorsToJson(const std::map<int32_t, double>& factors) {
  nlohmann::json j = nlohmann::json::object();
  for (const auto& [n, f] : factors) j[std::to_string(n)] = f;
  return j;
}

void SetShape(const std::map<int32_t, double>& factors, BatchResidual* shape) {
  shape->Clear();
  for (const auto& [n, f] : factors) shape->Set(n, f);
}

// {"<fed tokens>": factor, ...}: keys positive integers, factors positive and finite.
absl::StatusOr<std::map<int32_t, double>> ParseBatchFactors(const nlohmann::json& j, const std::string& what) {
  const auto bad = [&what](const std::string& why) {
    return absl::InvalidArgumentError(absl::StrCat("latency model ", what, ": ", why));
  };
  if (!j.is_object()) return bad("expected an object");
  std::map<int32_t, double> factors;
  for (const auto& [key, value] : j.items()) {
    int32_t n = 0;
    if (!absl::SimpleAtoi(key, &n) || n < 1) {
      return bad(absl::StrCat("key '", key, "' is not a token count >= 1"));
    }
    if (!value.is_number() || !(value.get<double>() > 0) || !std::isfinite(value.get<double>())) {
      return bad(absl::StrCat("factor for ", key, " must be a finite number > 0"));
    }
    factors[n] = value.get<double>();
  }
  return factors;
}

double UpdateScale(double scale, double raw, double observed) {
  // A worker that reports 0 did not measure (fakes, old builds): no information.
  if (!(raw > 0) || !(observed > 0) || !std::isfinite(observed)) return scale;
  const double ratio = std::clamp(observed / raw, kMinScale, kMaxScale);
  return std::clamp((1 - kScaleEma) * scale + kScaleEma * ratio, kMinScale, kMaxScale);
}

// Whether a Propose's first forward fed more than a decode step leaves a request's drafter:
// the tokens the last verify emitted (its chain and the bonus token) plus, with the pipeline,
// the guess. More is a catch-up on history the drafter missed (a request that sat out steps,
// a resend): a prefill, in which every fed token attends to the whole context, priced by a
// line fitted on forwards of one token per sequence. Measured on the 8-bit self-draft (one
// thread, context 200): 32 / 128 tokens fed cost 1.28x / 1.39x the line; learnt from, those
// calls lifted the correction to 1.6 where steady-state calls read 0.75-0.95, and a policy
// that priced drafting by it sat out, which made only catch-ups to learn from.
bool IsCatchUp(absl::Span<const int32_t> k, double first_forward_tokens) {
  double steady_feed = 0;
  for (int32_t levels : k) steady_feed += levels + 2;
  return first_forward_tokens > steady_feed;
}

}  // namespace

LatencyModel::LatencyModel() {
  // Same figures as configs/latency/a100-7b-160m.json (see that file for their provenance).
  description_ = "built-in default: 7B target + 160M draft on one A100 (SmartSpec regime)";
  target_ = {1.0e-7, 2.0e-4, 0.012};
  set_drafter("default", DrafterCost{false, {1.0e-8, 2.0e-5, 0.003}, 0});
  set_drafter("ngram", DrafterCost{true, {}, 0.0002});
  rpc_file_seconds_ = rpc_seconds_ = 0.0003;
}

absl::StatusOr<LatencyModel> LatencyModel::FromJson(const nlohmann::json& j) {
  if (!j.is_object()) return absl::InvalidArgumentError("latency model: expected a JSON object");
  LatencyModel m;
  m.drafters_.clear();
  m.description_ = j.value("description", std::string());
  if (!j.contains("target")) return absl::InvalidArgumentError("latency model: missing 'target'");
  auto target = ParseForward(j["target"], "latency model target");
  if (!target.ok()) return target.status();
  m.target_ = *target;
  if (j["target"].contains("batch_factors")) {
    auto factors = ParseBatchFactors(j["target"]["batch_factors"], "target.batch_factors");
    if (!factors.ok()) return factors.status();
    m.set_target_batch_factors(*std::move(factors));
  }
  if (j.contains("drafters")) {
    if (!j["drafters"].is_object()) {
      return absl::InvalidArgumentError("latency model: 'drafters' must be an object");
    }
    for (const auto& [name, entry] : j["drafters"].items()) {
      DrafterCost cost;
      const std::string kind = entry.value("kind", std::string("model"));
      if (kind == "model_free") {
        cost.model_free = true;
        if (!entry.contains("constant_seconds") || !entry["constant_seconds"].is_number() ||
            entry["constant_seconds"].get<double>() < 0) {
          return absl::InvalidArgumentError(
              absl::StrCat("latency model drafter '", name, "': needs constant_seconds >= 0"));
        }
        cost.constant_seconds = entry["constant_seconds"].get<double>();
      } else if (kind == "model") {
        auto fwd = ParseForward(entry, absl::StrCat("latency model drafter '", name, "'"));
        if (!fwd.ok()) return fwd.status();
        cost.forward = *fwd;
      } else {
        return absl::InvalidArgumentError(
            absl::StrCat("latency model drafter '", name, "': unknown kind '", kind, "'"));
      }
      m.set_drafter(name, cost);
      if (entry.contains("batch_factors")) {
        auto factors = ParseBatchFactors(entry["batch_factors"], absl::StrCat("drafters.", name, ".batch_factors"));
        if (!factors.ok()) return factors.status();
        m.set_drafter_batch_factors(name, *std::move(factors));
      }
    }
  }
  const double rpc = j.value("rpc_overhead_seconds", 0.0);
  if (!(rpc >= 0)) return absl::InvalidArgumentError("latency model: rpc_overhead_seconds < 0");
  m.rpc_file_seconds_ = m.rpc_seconds_ = rpc;
  if (j.contains("fit")) m.fit_info_ = j["fit"];
  return m;
}

absl::StatusOr<LatencyModel> LatencyModel::Load(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open latency model '", path, "'"));
  nlohmann::json j = nlohmann::json::parse(in, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded()) {
    return absl::InvalidArgumentError(absl::StrCat("latency model '", path, "' is not JSON"));
  }
  return FromJson(j);
}

nlohmann::json LatencyModel::ToJson() const {
  nlohmann::json j;
  j["description"] = description_;
  j["target"] = ForwardToJson(target_);
  if (!batch_factors_.empty()) j["target"]["batch_factors"] = BatchFactorsToJson(batch_factors_);
  nlohmann::json drafters = nlohmann::json::object();
  for (const auto& [name, entry] : drafters_) {
    const DrafterCost& cost = entry.cost;
    if (cost.model_free) {
      drafters[name] = {{"kind", "model_free"}, {"constant_seconds", cost.constant_seconds}};
    } else {
      nlohmann::json d = ForwardToJson(cost.forward);
      d["kind"] = "model";
      if (!entry.batch_factors.empty()) d["batch_factors"] = BatchFactorsToJson(entry.batch_factors);
      drafters[name] = d;
    }
  }
  j["drafters"] = drafters;
  j["rpc_overhead_seconds"] = rpc_file_seconds_;
  if (!fit_info_.is_null()) j["fit"] = fit_info_;
  return j;
}

absl::Status LatencyModel::Save(const std::string& path) const {
  std::ofstream out(path);
  if (!out) return absl::UnavailableError(absl::StrCat("cannot write '", path, "'"));
  out << ToJson().dump(2) << "\n";
  return out ? absl::OkStatus() : absl::DataLossError(absl::StrCat("short write to ", path));
}

const LatencyModel::DrafterEntry* LatencyModel::FindDrafter(const std::string& pool) const {
  auto it = drafters_.find(pool);
  if (it != drafters_.end()) return &it->second;
  it = drafters_.find("default");
  if (it != drafters_.end()) return &it->second;
  return drafters_.empty() ? nullptr : &drafters_.begin()->second;
}

double LatencyModel::draft_scale(const std::string& pool) const {
  auto it = draft_corrections_.find(pool);
  if (it != draft_corrections_.end()) return it->second.scale();
  // A pool never observed follows the target's correction: the file profiled both on one
  // machine, so a target that runs faster or slower than the file says suggests the drafter
  // does too. (Left at 1, an unobserved drafter would look ever dearer next to a refitted
  // target, and a policy that therefore never drafts would never observe it.)
  return TargetCorrection();
}

double LatencyModel::draft_call_seconds(const std::string& pool) const {
  auto it = draft_corrections_.find(pool);
  return it != draft_corrections_.end() ? it->second.per_call_seconds() : 0.0;
}

double LatencyModel::TargetCorrection() const {
  if (!refit_target_.has_value()) return target_scale_;
  // The refit's prediction over the file's at a typical decode step.
  const double file = target_.Predict(1024, 4);
  return file > 0 ? refit_target_->Predict(1024, 4) / file : 1.0;
}

ForwardCoefficients LatencyModel::EffectiveTarget() const {
  if (refit_target_.has_value()) return *refit_target_;
  return ScaledFileTarget();
}

DrafterCost LatencyModel::EffectiveDrafter(const std::string& pool) const {
  const DrafterEntry* entry = FindDrafter(pool);
  if (entry == nullptr) return DrafterCost{true, {}, 0};
  const double s = draft_scale(pool);
  DrafterCost c = entry->cost;
  c.forward = {c.forward.alpha * s, c.forward.gamma * s, c.forward.delta * s};
  c.constant_seconds *= s;
  return c;
}

double LatencyModel::TargetSeconds(double n_context, double n_batched) const {
  const double shape = TargetShape(n_batched);
  if (refit_target_.has_value()) {
    const double line = refit_target_->Predict(n_context, n_batched) * shape;
    return use_residual_ ? line * residual_.Factor(n_batched) : line;
  }
  return target_scale_ * target_.Predict(n_context, n_batched) * shape;
}

void LatencyModel::set_target_batch_factors(std::map<int32_t, double> factors) {
  batch_factors_ = std::move(factors);
  SetShape(batch_factors_, &batch_shape_);
}

void LatencyModel::set_drafter_batch_factors(const std::string& pool, std::map<int32_t, double> factors) {
  auto it = drafters_.find(pool);
  if (it == drafters_.end()) return;
  it->second.batch_factors = std::move(factors);
  SetShape(it->second.batch_factors, &it->second.shape);
}

const std::map<int32_t, double>& LatencyModel::drafter_batch_factors(const std::string& pool) const {
  static const std::map<int32_t, double> kNone;
  auto it = drafters_.find(pool);
  return it == drafters_.end() ? kNone : it->second.batch_factors;
}

double LatencyModel::DraftShape(const std::string& pool, double n_batched) const {
  return Resolve(pool).Shape(n_batched);
}

double LatencyModel::RawDraftSeconds(const ResolvedDrafter& drafter, absl::Span<const int32_t> ctx,
                                     absl::Span<const int32_t> k, double first_forward_tokens) {
  int32_t depth = 0;
  for (int32_t ki : k) depth = std::max(depth, ki);
  if (depth == 0) return 0;
  const DrafterCost& cost = *drafter.raw;
  if (cost.model_free) return cost.constant_seconds;
  double total = 0;
  for (int32_t s = 1; s <= depth; ++s) {
    double n_ctx = 0, n_tok = 0;
    for (size_t i = 0; i < k.size() && i < ctx.size(); ++i) {
      if (k[i] >= s) {
        n_ctx += ctx[i] + s - 1;
        n_tok += 1;
      }
    }
    if (s == 1 && first_forward_tokens >= 0) n_tok = std::max(n_tok, first_forward_tokens);
    total += cost.forward.Predict(n_ctx, n_tok) * drafter.Shape(n_tok);
  }
  return total;
}

double LatencyModel::DraftSeconds(const std::string& pool, absl::Span<const int32_t> ctx,
                                  absl::Span<const int32_t> k) const {
  return DraftSeconds(Resolve(pool), ctx, k);
}

LatencyModel::ResolvedDrafter LatencyModel::Resolve(const std::string& pool) const {
  ResolvedDrafter resolved;
  const DrafterEntry* entry = FindDrafter(pool);
  if (entry == nullptr) return resolved;
  resolved.raw = &entry->cost;
  resolved.shape = &entry->shape;
  // One lookup of the pool's correction for both figures (draft_scale, draft_call_seconds).
  auto it = draft_corrections_.find(pool);
  if (it == draft_corrections_.end()) {
    resolved.scale = TargetCorrection();
  } else {
    resolved.scale = it->second.scale();
    resolved.call_seconds = it->second.per_call_seconds();
  }
  return resolved;
}

LatencyModel::ResolvedDrafter LatencyModel::ResolveAhead(const std::string& pool) const {
  ResolvedDrafter resolved = Resolve(pool);
  auto it = ahead_draft_corrections_.find(pool);
  if (resolved.raw != nullptr && it != ahead_draft_corrections_.end()) {
    resolved.scale = it->second.scale();
    resolved.call_seconds = it->second.per_call_seconds();
  }
  return resolved;
}

double LatencyModel::DraftSeconds(const ResolvedDrafter& drafter, absl::Span<const int32_t> ctx,
                                  absl::Span<const int32_t> k, double first_forward_tokens) const {
  if (drafter.raw == nullptr) return 0;
  const double line = RawDraftSeconds(drafter, ctx, k, first_forward_tokens);
  return DraftCorrection::Apply(drafter.call_seconds, drafter.scale, line);
}

void LatencyModel::ObserveTarget(double n_context, double n_batched, double observed) {
  const double shape = TargetShape(n_batched);
  target_scale_ = UpdateScale(target_scale_, target_.Predict(n_context, n_batched) * shape, observed);
  // Against the refit only: the multiplicative scale above has already absorbed a general
  // slowdown, and learning both from one step would count it twice.
  if (use_residual_ && refit_target_.has_value()) {
    residual_.Observe(n_batched, refit_target_->Predict(n_context, n_batched) * shape, observed);
  }
}

void LatencyModel::set_batch_residual(bool on) {
  use_residual_ = on;
  if (!on) residual_.Clear();
}

void LatencyModel::ObserveDraft(const std::string& pool, absl::Span<const int32_t> ctx,
                                absl::Span<const int32_t> k, double observed,
                                double first_forward_tokens) {
  const ResolvedDrafter drafter = Resolve(pool);
  if (drafter.raw == nullptr) return;
  if (IsCatchUp(k, first_forward_tokens)) return;
  // A pool's first observation starts from the correction it had followed until then.
  auto it = draft_corrections_.try_emplace(pool, drafter.scale).first;
  it->second.Observe(RawDraftSeconds(drafter, ctx, k, first_forward_tokens), observed);
}

void LatencyModel::ObserveDraftAhead(const std::string& pool, absl::Span<const int32_t> ctx,
                                     absl::Span<const int32_t> k, double observed, double first_forward_tokens) {
  const ResolvedDrafter drafter = Resolve(pool);
  if (drafter.raw == nullptr) return;
  if (IsCatchUp(k, first_forward_tokens)) return;
  // Starts from the pool's serial correction: until drafts made ahead are seen to run slower
  // (or faster), they are priced as the serial ones.
  auto it = ahead_draft_corrections_.try_emplace(pool, drafter.scale).first;
  it->second.Observe(RawDraftSeconds(drafter, ctx, k, first_forward_tokens), observed);
}

void LatencyModel::ObserveDraftExposure(double exposed_share) {
  if (!std::isfinite(exposed_share)) return;
  draft_exposure_ = (1 - kScaleEma) * draft_exposure_ + kScaleEma * std::clamp(exposed_share, 0.0, 1.0);
}

void LatencyModel::ObserveAlternativeOutcome(bool held, bool greedy) {
  double& rescue = alternative_rescue_[greedy ? 0 : 1];
  rescue = (1 - kScaleEma) * rescue + kScaleEma * (held ? 1.0 : 0.0);
}

void LatencyModel::ObserveRpcOverhead(double seconds_per_rpc) {
  if (!(seconds_per_rpc >= 0) || !std::isfinite(seconds_per_rpc)) return;
  rpc_seconds_ = (1 - kScaleEma) * rpc_seconds_ + kScaleEma * seconds_per_rpc;
}

std::string LatencyModel::Summary() const {
  std::string s = absl::StrFormat(
      "%s | target alpha=%.3g gamma=%.3g delta=%.3g (x%.2f) rpc=%.3gs", description_,
      target_.alpha, target_.gamma, target_.delta, target_scale_, rpc_seconds_);
  if (draft_exposure_ < 1.0) absl::StrAppendFormat(&s, " | draft exposed %.2f", draft_exposure_);
  if (draft_ahead_alternatives_[0] > 0 || draft_ahead_alternatives_[1] > 0) {
    absl::StrAppendFormat(&s, " | alternatives ahead %d greedy %d sampled, rescue %.2f greedy %.2f sampled",
                          draft_ahead_alternatives_[0], draft_ahead_alternatives_[1], alternative_rescue_[0],
                          alternative_rescue_[1]);
  }
  if (!batch_factors_.empty()) {
    absl::StrAppendFormat(&s, " | batch shape over %d sizes", batch_factors_.size());
  }
  if (refit_target_.has_value()) {
    absl::StrAppendFormat(&s, " | refit alpha=%.3g gamma=%.3g delta=%.3g", refit_target_->alpha,
                          refit_target_->gamma, refit_target_->delta);
  }
  for (const auto& [name, entry] : drafters_) {
    const DrafterCost& cost = entry.cost;
    if (cost.model_free) {
      absl::StrAppendFormat(&s, " | %s const=%.3gs", name, cost.constant_seconds);
    } else {
      absl::StrAppendFormat(&s, " | %s alpha=%.3g gamma=%.3g delta=%.3g (x%.2f", name,
                            cost.forward.alpha, cost.forward.gamma, cost.forward.delta,
                            draft_scale(name));
      const double per_call = draft_call_seconds(name);
      if (per_call != 0) absl::StrAppendFormat(&s, " %+.3gs a call", per_call);
      s += ")";
      if (!entry.batch_factors.empty()) {
        absl::StrAppendFormat(&s, " shape over %d sizes", entry.batch_factors.size());
      }
    }
  }
  return s;
}

absl::StatusOr<ForwardFit> FitForward(absl::Span<const ForwardSample> samples) {
  if (samples.size() < 3) return absl::InvalidArgumentError("fit needs at least 3 samples");
  // Normal equations (X^T X) b = X^T y with columns [n_context, n_batched, 1]; the columns
  // are rescaled to unit max so the 3x3 solve stays well conditioned.
  std::array<double, 3> scale = {1, 1, 1};
  for (const auto& s : samples) {
    scale[0] = std::max(scale[0], std::abs(s.n_context));
    scale[1] = std::max(scale[1], std::abs(s.n_batched));
  }
  double a[3][4] = {};
  for (const auto& s : samples) {
    const double x[3] = {s.n_context / scale[0], s.n_batched / scale[1], 1.0};
    for (int r = 0; r < 3; ++r) {
      for (int c = 0; c < 3; ++c) a[r][c] += x[r] * x[c];
      a[r][3] += x[r] * s.seconds;
    }
  }
  // Gaussian elimination with partial pivoting.
  for (int col = 0; col < 3; ++col) {
    int pivot = col;
    for (int r = col + 1; r < 3; ++r) {
      if (std::abs(a[r][col]) > std::abs(a[pivot][col])) pivot = r;
    }
    if (std::abs(a[pivot][col]) < 1e-12 * samples.size()) {
      return absl::InvalidArgumentError(
          "fit is singular: vary both context length and batched tokens in the samples");
    }
    for (int c = 0; c < 4; ++c) std::swap(a[col][c], a[pivot][c]);
    for (int r = 0; r < 3; ++r) {
      if (r == col) continue;
      const double f = a[r][col] / a[col][col];
      for (int c = col; c < 4; ++c) a[r][c] -= f * a[col][c];
    }
  }
  ForwardFit fit;
  fit.coefficients.alpha = a[0][3] / a[0][0] / scale[0];
  fit.coefficients.gamma = a[1][3] / a[1][1] / scale[1];
  fit.coefficients.delta = a[2][3] / a[2][2];
  double mean = 0;
  for (const auto& s : samples) mean += s.seconds;
  mean /= samples.size();
  double ss_res = 0, ss_tot = 0;
  for (const auto& s : samples) {
    const double pred = fit.coefficients.Predict(s.n_context, s.n_batched);
    ss_res += (pred - s.seconds) * (pred - s.seconds);
    ss_tot += (s.seconds - mean) * (s.seconds - mean);
    if (s.seconds > 0) {
      fit.worst_relative_error =
          std::max(fit.worst_relative_error, std::abs(pred - s.seconds) / s.seconds);
    }
  }
  fit.r2 = ss_tot > 0 ? 1.0 - ss_res / ss_tot : (ss_res == 0 ? 1.0 : 0.0);
  return fit;
}

}  // namespace splitspec::router

// AcceptanceStats bookkeeping.
#include "common/spec/acceptance_stats.h"

#include "absl/strings/str_cat.h"

namespace splitspec::spec {
namespace {

void AddInto(std::vector<int64_t>& into, const std::vector<int64_t>& from) {
  if (into.size() < from.size()) into.resize(from.size(), 0);
  for (size_t i = 0; i < from.size(); ++i) into[i] += from[i];
}

}  // namespace

absl::Status AcceptanceStats::Record(int32_t n_drafted, int32_t max_depth, int32_t accept_length) {
  if (n_drafted < 0 || accept_length < 0 || accept_length > max_depth || max_depth > n_drafted ||
      (n_drafted > 0 && max_depth < 1)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "inconsistent verification record: drafted ", n_drafted, ", max depth ", max_depth,
        ", accepted ", accept_length, " (need 0 <= accepted <= max depth <= drafted)"));
  }
  if (n_drafted == 0) return absl::OkStatus();
  ++proposals_;
  drafted_tokens_ += n_drafted;
  accepted_tokens_ += accept_length;
  if (offered_at_.size() < static_cast<size_t>(max_depth)) {
    offered_at_.resize(max_depth, 0);
    accepted_at_.resize(max_depth, 0);
  }
  for (int32_t i = 0; i < max_depth; ++i) ++offered_at_[i];
  for (int32_t i = 0; i < accept_length; ++i) ++accepted_at_[i];
  if (histogram_.size() <= static_cast<size_t>(accept_length)) {
    histogram_.resize(accept_length + 1, 0);
  }
  ++histogram_[accept_length];
  return absl::OkStatus();
}

absl::Status AcceptanceStats::Record(const DraftTree& tree, const VerifyOutcome& result) {
  return Record(tree.size(), tree.max_depth(), result.accept_length());
}

void AcceptanceStats::Merge(const AcceptanceStats& other) {
  proposals_ += other.proposals_;
  drafted_tokens_ += other.drafted_tokens_;
  accepted_tokens_ += other.accepted_tokens_;
  AddInto(offered_at_, other.offered_at_);
  AddInto(accepted_at_, other.accepted_at_);
  AddInto(histogram_, other.histogram_);
}

double AcceptanceStats::MeanAcceptLength() const {
  return proposals_ == 0 ? 0.0 : static_cast<double>(accepted_tokens_) / proposals_;
}

double AcceptanceStats::MeanTokensPerStep() const {
  return proposals_ == 0 ? 0.0 : MeanAcceptLength() + 1.0;
}

double AcceptanceStats::AcceptanceRate() const {
  return drafted_tokens_ == 0 ? 0.0 : static_cast<double>(accepted_tokens_) / drafted_tokens_;
}

double AcceptanceStats::PositionAcceptanceRate(int32_t position) const {
  if (position < 0 || static_cast<size_t>(position) >= offered_at_.size() ||
      offered_at_[position] == 0) {
    return 0.0;
  }
  return static_cast<double>(accepted_at_[position]) / offered_at_[position];
}

}  // namespace splitspec::spec

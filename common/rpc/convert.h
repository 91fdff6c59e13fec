// proto <-> core conversions for the worker services (splitspec.v1 messages <-> the plain
// types of common/spec/worker_api.h). Conversions only copy and apply field defaults; checking
// values against a model (vocab, tree shape, limits) is the cores' job, so that in-process
// callers get the same checks.
#ifndef SPLITSPEC_COMMON_RPC_CONVERT_H_
#define SPLITSPEC_COMMON_RPC_CONVERT_H_

#include <vector>

#include "common/engine/sampling/sampler.h"
#include "common/spec/worker_api.h"
#include "splitspec/v1/common.pb.h"
#include "splitspec/v1/drafter.pb.h"
#include "splitspec/v1/verifier.pb.h"

namespace splitspec::rpc {

// top_p 0 (unset) is read as 1.
engine::SamplingParams FromProto(const v1::SamplingParams& proto);
void ToProto(const engine::SamplingParams& params, v1::SamplingParams* proto);

spec::DraftProposal FromProto(const v1::DraftTree& proto);
void ToProto(const spec::DraftProposal& draft, v1::DraftTree* proto);

// branching 0 (unset) is read as 1.
spec::ProposalShape FromProto(const v1::ProposalShape& proto);
void ToProto(const spec::ProposalShape& shape, v1::ProposalShape* proto);

spec::WorkerInfo FromProto(const v1::WorkerInfo& proto);
void ToProto(const spec::WorkerInfo& info, v1::WorkerInfo* proto);

// ---- verifier ---------------------------------------------------------------------------
std::vector<spec::PrefillItem> FromProto(const v1::PrefillRequest& proto);
void ToProto(const std::vector<spec::PrefillItem>& items, v1::PrefillRequest* proto);
std::vector<spec::PrefillResult> FromProto(const v1::PrefillResponse& proto);
void ToProto(const std::vector<spec::PrefillResult>& results, v1::PrefillResponse* proto);

std::vector<spec::VerifyItem> FromProto(const v1::VerifyRequest& proto);
void ToProto(const std::vector<spec::VerifyItem>& items, v1::VerifyRequest* proto);
spec::VerifyResponse FromProto(const v1::VerifyResponse& proto);
void ToProto(const spec::VerifyResponse& response, v1::VerifyResponse* proto);

// ---- drafter ----------------------------------------------------------------------------
std::vector<spec::ProposeItem> FromProto(const v1::ProposeRequest& proto);
void ToProto(const std::vector<spec::ProposeItem>& items, v1::ProposeRequest* proto);
spec::ProposeResponse FromProto(const v1::ProposeResponse& proto);
void ToProto(const spec::ProposeResponse& response, v1::ProposeResponse* proto);

std::vector<spec::RequestId> FromProto(const v1::ReleaseRequest& proto);

}  // namespace splitspec::rpc

#endif  // SPLITSPEC_COMMON_RPC_CONVERT_H_

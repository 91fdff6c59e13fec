// proto <-> core conversions (see convert.h).
#include "common/rpc/convert.h"

#include <string>

namespace splitspec::rpc {
namespace {

template <typename T>
std::vector<T> ToVector(const google::protobuf::RepeatedField<T>& field) {
  return std::vector<T>(field.begin(), field.end());
}

template <typename T>
void Assign(const std::vector<T>& values, google::protobuf::RepeatedField<T>* field) {
  field->Clear();
  field->Add(values.begin(), values.end());
}

absl::Status FromProto(const v1::ItemStatus& proto) {
  if (proto.code() == 0) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(proto.code()), proto.message());
}

void ToProto(const absl::Status& status, v1::ItemStatus* proto) {
  proto->set_code(static_cast<int32_t>(status.code()));
  proto->set_message(std::string(status.message()));
}

}  // namespace

engine::SamplingParams FromProto(const v1::SamplingParams& proto) {
  engine::SamplingParams params;
  params.temperature = proto.temperature();
  params.top_k = proto.top_k();
  params.top_p = proto.top_p() == 0.0f ? 1.0f : proto.top_p();
  params.seed = proto.seed();
  return params;
}

void ToProto(const engine::SamplingParams& params, v1::SamplingParams* proto) {
  proto->set_temperature(params.temperature);
  proto->set_top_k(params.top_k);
  proto->set_top_p(params.top_p);
  proto->set_seed(params.seed);
}

spec::DraftProposal FromProto(const v1::DraftTree& proto) {
  spec::DraftProposal draft;
  draft.tokens = ToVector(proto.tokens());
  draft.parents = ToVector(proto.parents());
  draft.probs = ToVector(proto.probs());
  draft.scores = ToVector(proto.scores());
  return draft;
}

void ToProto(const spec::DraftProposal& draft, v1::DraftTree* proto) {
  Assign(draft.tokens, proto->mutable_tokens());
  Assign(draft.parents, proto->mutable_parents());
  Assign(draft.probs, proto->mutable_probs());
  Assign(draft.scores, proto->mutable_scores());
}

spec::ProposalShape FromProto(const v1::ProposalShape& proto) {
  spec::ProposalShape shape;
  shape.depth = proto.depth();
  shape.branching = proto.branching() == 0 ? 1 : proto.branching();
  shape.max_nodes = proto.max_nodes();
  return shape;
}

void ToProto(const spec::ProposalShape& shape, v1::ProposalShape* proto) {
  proto->set_depth(shape.depth);
  proto->set_branching(shape.branching);
  proto->set_max_nodes(shape.max_nodes);
}

spec::WorkerInfo FromProto(const v1::WorkerInfo& proto) {
  spec::WorkerInfo info;
  info.model_name = proto.model_name();
  info.vocab_size = proto.vocab_size();
  info.free_blocks = proto.free_blocks();
  info.total_blocks = proto.total_blocks();
  info.block_size = proto.block_size();
  info.max_draft_tokens = proto.max_draft_tokens();
  info.live_sessions = proto.live_sessions();
  info.max_context_tokens = proto.max_context_tokens();
  info.held_tokens = proto.held_tokens();
  info.step_port = proto.step_port();
  info.step_token = proto.step_token();
  return info;
}

void ToProto(const spec::WorkerInfo& info, v1::WorkerInfo* proto) {
  proto->set_model_name(info.model_name);
  proto->set_vocab_size(info.vocab_size);
  proto->set_free_blocks(info.free_blocks);
  proto->set_total_blocks(info.total_blocks);
  proto->set_block_size(info.block_size);
  proto->set_max_draft_tokens(info.max_draft_tokens);
  proto->set_live_sessions(info.live_sessions);
  proto->set_max_context_tokens(info.max_context_tokens);
  proto->set_held_tokens(info.held_tokens);
  proto->set_step_port(info.step_port);
  proto->set_step_token(info.step_token);
}

std::vector<spec::PrefillItem> FromProto(const v1::PrefillRequest& proto) {
  std::vector<spec::PrefillItem> items;
  items.reserve(proto.items_size());
  for (const v1::PrefillItem& p : proto.items()) {
    spec::PrefillItem item;
    item.id = p.request_id();
    item.tokens = ToVector(p.tokens());
    item.sampling = FromProto(p.sampling());
    items.push_back(std::move(item));
  }
  return items;
}

void ToProto(const std::vector<spec::PrefillItem>& items, v1::PrefillRequest* proto) {
  proto->clear_items();
  for (const spec::PrefillItem& item : items) {
    v1::PrefillItem* p = proto->add_items();
    p->set_request_id(item.id);
    Assign(item.tokens, p->mutable_tokens());
    ToProto(item.sampling, p->mutable_sampling());
  }
}

std::vector<spec::PrefillResult> FromProto(const v1::PrefillResponse& proto) {
  std::vector<spec::PrefillResult> results;
  results.reserve(proto.results_size());
  for (const v1::PrefillResult& p : proto.results()) {
    results.push_back(spec::PrefillResult{p.request_id(), p.next_token(), FromProto(p.status())});
  }
  return results;
}

void ToProto(const std::vector<spec::PrefillResult>& results, v1::PrefillResponse* proto) {
  proto->clear_results();
  for (const spec::PrefillResult& result : results) {
    v1::PrefillResult* p = proto->add_results();
    p->set_request_id(result.id);
    p->set_next_token(result.next_token);
    if (!result.status.ok()) ToProto(result.status, p->mutable_status());
  }
}

std::vector<spec::VerifyItem> FromProto(const v1::VerifyRequest& proto) {
  std::vector<spec::VerifyItem> items;
  items.reserve(proto.items_size());
  for (const v1::VerifyItem& p : proto.items()) {
    items.push_back(spec::VerifyItem{p.request_id(), FromProto(p.draft())});
  }
  return items;
}

void ToProto(const std::vector<spec::VerifyItem>& items, v1::VerifyRequest* proto) {
  proto->clear_items();
  for (const spec::VerifyItem& item : items) {
    v1::VerifyItem* p = proto->add_items();
    p->set_request_id(item.id);
    ToProto(item.draft, p->mutable_draft());
  }
}

spec::VerifyResponse FromProto(const v1::VerifyResponse& proto) {
  spec::VerifyResponse response;
  response.results.reserve(proto.results_size());
  for (const v1::VerifyResult& p : proto.results()) {
    spec::VerifyResult result;
    result.id = p.request_id();
    result.tokens = ToVector(p.tokens());
    result.accept_length = p.accept_length();
    result.status = FromProto(p.status());
    response.results.push_back(std::move(result));
  }
  response.compute_seconds = proto.compute_seconds();
  response.free_blocks = proto.free_blocks();
  response.total_blocks = proto.total_blocks();
  return response;
}

void ToProto(const spec::VerifyResponse& response, v1::VerifyResponse* proto) {
  proto->clear_results();
  for (const spec::VerifyResult& result : response.results) {
    v1::VerifyResult* p = proto->add_results();
    p->set_request_id(result.id);
    Assign(result.tokens, p->mutable_tokens());
    p->set_accept_length(result.accept_length);
    if (!result.status.ok()) ToProto(result.status, p->mutable_status());
  }
  proto->set_compute_seconds(response.compute_seconds);
  proto->set_free_blocks(response.free_blocks);
  proto->set_total_blocks(response.total_blocks);
}

std::vector<spec::ProposeItem> FromProto(const v1::ProposeRequest& proto) {
  std::vector<spec::ProposeItem> items;
  items.reserve(proto.items_size());
  for (const v1::ProposeItem& p : proto.items()) {
    spec::ProposeItem item;
    item.id = p.request_id();
    item.known_length = p.known_length();
    item.new_tokens = ToVector(p.new_tokens());
    item.shape = FromProto(p.shape());
    item.sampling = FromProto(p.sampling());
    item.assumed_tokens = p.assumed_tokens();
    item.alternatives = p.alternatives();
    items.push_back(std::move(item));
  }
  return items;
}

void ToProto(const std::vector<spec::ProposeItem>& items, v1::ProposeRequest* proto) {
  proto->clear_items();
  for (const spec::ProposeItem& item : items) {
    v1::ProposeItem* p = proto->add_items();
    p->set_request_id(item.id);
    p->set_known_length(item.known_length);
    Assign(item.new_tokens, p->mutable_new_tokens());
    ToProto(item.shape, p->mutable_shape());
    ToProto(item.sampling, p->mutable_sampling());
    p->set_assumed_tokens(item.assumed_tokens);
    p->set_alternatives(item.alternatives);
  }
}

spec::ProposeResponse FromProto(const v1::ProposeResponse& proto) {
  spec::ProposeResponse response;
  response.results.reserve(proto.results_size());
  for (const v1::ProposeResult& p : proto.results()) {
    spec::ProposeResult result;
    result.id = p.request_id();
    result.draft = FromProto(p.draft());
    result.status = FromProto(p.status());
    for (const v1::AlternativeDraft& a : p.alternatives()) {
      result.alternatives.push_back({ToVector(a.assumed()), FromProto(a.draft())});
    }
    response.results.push_back(std::move(result));
  }
  response.compute_seconds = proto.compute_seconds();
  return response;
}

void ToProto(const spec::ProposeResponse& response, v1::ProposeResponse* proto) {
  proto->clear_results();
  for (const spec::ProposeResult& result : response.results) {
    v1::ProposeResult* p = proto->add_results();
    p->set_request_id(result.id);
    ToProto(result.draft, p->mutable_draft());
    if (!result.status.ok()) ToProto(result.status, p->mutable_status());
    for (const spec::AlternativeDraft& a : result.alternatives) {
      v1::AlternativeDraft* alternative = p->add_alternatives();
      Assign(a.assumed, alternative->mutable_assumed());
      ToProto(a.draft, alternative->mutable_draft());
    }
  }
  proto->set_compute_seconds(response.compute_seconds);
}

std::vector<spec::RequestId> FromProto(const v1::ReleaseRequest& proto) {
  return std::vector<spec::RequestId>(proto.request_ids().begin(), proto.request_ids().end());
}

}  // namespace splitspec::rpc

// The step socket's compact encoding (common/rpc/step_codec.h): every field of Verify's and
// Propose's messages survives a round trip bit for bit, the protobuf messages' two defaults read
// the same, and bytes that are not a whole message are refused, never read past.
#include "common/rpc/step_codec.h"

#include <gtest/gtest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <functional>
#include <limits>
#include <string>
#include <vector>

namespace splitspec::rpc {
namespace {

bool SameBits(const std::vector<float>& a, const std::vector<float>& b) {
  return a.size() == b.size() &&
         (a.empty() || std::memcmp(a.data(), b.data(), a.size() * sizeof(float)) == 0);
}

std::vector<spec::VerifyItem> SomeItems() {
  std::vector<spec::VerifyItem> items(3);
  items[0].id = 7;  // a chain with the drafter's scores
  items[0].draft.tokens = {5, 9, 11};
  items[0].draft.parents = {-1, 0, 1};
  items[0].draft.scores = {0.9f, 0.5f, 0.25f};
  items[1].id = std::numeric_limits<uint64_t>::max();  // a plain decode step: no draft
  items[2].id = 1;  // a sampled tree: a draft distribution per node, a NaN among them
  items[2].draft.tokens = {3, 4};
  items[2].draft.parents = {-1, -1};
  items[2].draft.probs = {0.5f, 0.5f, 0.0f, std::numeric_limits<float>::quiet_NaN(), -0.0f, 1.0f};
  return items;
}

spec::VerifyResponse SomeResponse() {
  spec::VerifyResponse response;
  response.results.resize(3);
  response.results[0].id = 7;
  response.results[0].tokens = {5, 9, 12};
  response.results[0].accept_length = 2;
  response.results[1].id = std::numeric_limits<uint64_t>::max();
  response.results[1].status = absl::OutOfRangeError("the step would run past the context");
  response.results[2].id = 1;
  response.results[2].tokens = {8};
  response.compute_seconds = 0.0095123456789;
  response.free_blocks = 120;
  response.total_blocks = 128;
  return response;
}

std::vector<spec::ProposeItem> SomeProposeItems() {
  std::vector<spec::ProposeItem> items(2);
  items[0].id = 11;  // a new greedy chain
  items[0].new_tokens = {1, 2, 3, 1, 2};
  items[0].shape = {4, 1, 0};
  items[1].id = std::numeric_limits<uint64_t>::max();  // a sampled tree after known tokens
  items[1].known_length = 40;
  items[1].new_tokens = {9};
  items[1].shape = {3, 2, 5};
  items[1].sampling = {0.8f, 40, 0.95f, std::numeric_limits<uint64_t>::max() - 1};
  items[0].assumed_tokens = 3;  // a draft made ahead: the last three are a hypothesis
  items[0].alternatives = 2;
  return items;
}

spec::ProposeResponse SomeProposeResponse() {
  spec::ProposeResponse response;
  response.results.resize(2);
  response.results[0].id = 11;
  response.results[0].draft.tokens = {5, 9, 6};
  response.results[0].draft.parents = {-1, 0, -1};
  response.results[0].draft.probs = {0.25f, std::numeric_limits<float>::infinity(), 0.0f};
  response.results[0].draft.scores = {0.8f, 0.6f, 0.1f};
  response.results[0].alternatives = {{{4, 8}, {}}, {{3}, {{2, 2}, {-1, 0}, {}, {}}}};
  response.results[1].id = 12;
  response.results[1].status = absl::FailedPreconditionError("resend the whole history");
  response.compute_seconds = 0.00123456789;
  return response;
}

TEST(StepCodecTest, RequestRoundTripsEveryField) {
  const std::vector<spec::VerifyItem> items = SomeItems();
  absl::StatusOr<std::vector<spec::VerifyItem>> decoded =
      DecodeVerifyItems(EncodeVerifyItems(items));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_EQ(decoded->size(), items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    EXPECT_EQ((*decoded)[i].id, items[i].id);
    EXPECT_EQ((*decoded)[i].draft.tokens, items[i].draft.tokens);
    EXPECT_EQ((*decoded)[i].draft.parents, items[i].draft.parents);
    EXPECT_TRUE(SameBits((*decoded)[i].draft.probs, items[i].draft.probs)) << "item " << i;
    EXPECT_TRUE(SameBits((*decoded)[i].draft.scores, items[i].draft.scores)) << "item " << i;
  }
  absl::StatusOr<std::vector<spec::VerifyItem>> none = DecodeVerifyItems(EncodeVerifyItems({}));
  ASSERT_TRUE(none.ok());
  EXPECT_TRUE(none->empty());
}

TEST(StepCodecTest, AnswerRoundTripsEveryFieldAndStatus) {
  const spec::VerifyResponse response = SomeResponse();
  absl::StatusOr<spec::VerifyResponse> decoded =
      DecodeVerifyResponse(EncodeVerifyResponse(response));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_EQ(decoded->results.size(), response.results.size());
  for (size_t i = 0; i < response.results.size(); ++i) {
    EXPECT_EQ(decoded->results[i].id, response.results[i].id);
    EXPECT_EQ(decoded->results[i].tokens, response.results[i].tokens);
    EXPECT_EQ(decoded->results[i].accept_length, response.results[i].accept_length);
    EXPECT_EQ(decoded->results[i].status, response.results[i].status);
  }
  EXPECT_EQ(decoded->compute_seconds, response.compute_seconds);  // bit for bit, not nearly
  EXPECT_EQ(decoded->free_blocks, 120);
  EXPECT_EQ(decoded->total_blocks, 128);
}

TEST(StepCodecTest, ProposeRequestRoundTripsEveryField) {
  const std::vector<spec::ProposeItem> items = SomeProposeItems();
  absl::StatusOr<std::vector<spec::ProposeItem>> decoded =
      DecodeProposeItems(EncodeProposeItems(items));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_EQ(decoded->size(), items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    const spec::ProposeItem& a = (*decoded)[i];
    const spec::ProposeItem& b = items[i];
    EXPECT_EQ(a.id, b.id);
    EXPECT_EQ(a.known_length, b.known_length);
    EXPECT_EQ(a.new_tokens, b.new_tokens);
    EXPECT_EQ(a.shape.depth, b.shape.depth);
    EXPECT_EQ(a.shape.branching, b.shape.branching);
    EXPECT_EQ(a.shape.max_nodes, b.shape.max_nodes);
    EXPECT_EQ(a.sampling.temperature, b.sampling.temperature);
    EXPECT_EQ(a.sampling.top_k, b.sampling.top_k);
    EXPECT_EQ(a.sampling.top_p, b.sampling.top_p);
    EXPECT_EQ(a.sampling.seed, b.sampling.seed);
    EXPECT_EQ(a.assumed_tokens, b.assumed_tokens);
    EXPECT_EQ(a.alternatives, b.alternatives);
  }
}

// Zero branching and zero top_p mean "a chain" and "no nucleus cut", as in the protobuf messages.
TEST(StepCodecTest, ProposeRequestReadsTheProtobufDefaults) {
  std::vector<spec::ProposeItem> items(1);
  items[0].shape.branching = 0;
  items[0].sampling.top_p = 0.0f;
  absl::StatusOr<std::vector<spec::ProposeItem>> decoded =
      DecodeProposeItems(EncodeProposeItems(items));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_EQ((*decoded)[0].shape.branching, 1);
  EXPECT_EQ((*decoded)[0].sampling.top_p, 1.0f);
}

TEST(StepCodecTest, ProposeAnswerRoundTripsEveryField) {
  const spec::ProposeResponse response = SomeProposeResponse();
  absl::StatusOr<spec::ProposeResponse> decoded =
      DecodeProposeResponse(EncodeProposeResponse(response));
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  ASSERT_EQ(decoded->results.size(), response.results.size());
  for (size_t i = 0; i < response.results.size(); ++i) {
    const spec::ProposeResult& a = decoded->results[i];
    const spec::ProposeResult& b = response.results[i];
    EXPECT_EQ(a.id, b.id);
    EXPECT_EQ(a.status, b.status);
    EXPECT_EQ(a.draft.tokens, b.draft.tokens);
    EXPECT_EQ(a.draft.parents, b.draft.parents);
    EXPECT_TRUE(SameBits(a.draft.probs, b.draft.probs)) << "result " << i;
    EXPECT_TRUE(SameBits(a.draft.scores, b.draft.scores)) << "result " << i;
    ASSERT_EQ(a.alternatives.size(), b.alternatives.size()) << "result " << i;
    for (size_t j = 0; j < a.alternatives.size(); ++j) {
      EXPECT_EQ(a.alternatives[j].assumed, b.alternatives[j].assumed);
      EXPECT_EQ(a.alternatives[j].draft.tokens, b.alternatives[j].draft.tokens);
      EXPECT_EQ(a.alternatives[j].draft.parents, b.alternatives[j].draft.parents);
    }
  }
  EXPECT_EQ(decoded->compute_seconds, response.compute_seconds);
}

TEST(StepCodecTest, AStatusCodeOutsideAbslsRangeReadsAsUnknown) {
  spec::VerifyResponse response;
  response.results.resize(1);
  std::string bytes = EncodeVerifyResponse(response);
  // The first result's code sits after the result count, the id and accept_length.
  const int32_t code = 99;
  std::memcpy(bytes.data() + 4 + 8 + 4, &code, sizeof(code));
  absl::StatusOr<spec::VerifyResponse> decoded = DecodeVerifyResponse(bytes);
  ASSERT_TRUE(decoded.ok()) << decoded.status();
  EXPECT_TRUE(absl::IsUnknown(decoded->results[0].status)) << decoded->results[0].status;
}

TEST(StepCodecTest, EveryTruncationAndTrailingBytesAreRefused) {
  struct Message {
    const char* name;
    std::string bytes;
    std::function<absl::Status(const std::string&)> decode;
  };
  const std::vector<Message> messages = {
      {"verify request", EncodeVerifyItems(SomeItems()),
       [](const std::string& b) { return DecodeVerifyItems(b).status(); }},
      {"verify answer", EncodeVerifyResponse(SomeResponse()),
       [](const std::string& b) { return DecodeVerifyResponse(b).status(); }},
      {"propose request", EncodeProposeItems(SomeProposeItems()),
       [](const std::string& b) { return DecodeProposeItems(b).status(); }},
      {"propose answer", EncodeProposeResponse(SomeProposeResponse()),
       [](const std::string& b) { return DecodeProposeResponse(b).status(); }},
  };
  for (const Message& m : messages) {
    ASSERT_TRUE(m.decode(m.bytes).ok()) << m.name;
    for (size_t n = 0; n < m.bytes.size(); ++n) {
      const absl::Status status = m.decode(m.bytes.substr(0, n));
      EXPECT_TRUE(absl::IsInvalidArgument(status)) << m.name << " cut at " << n << ": " << status;
    }
    const absl::Status status = m.decode(m.bytes + '\0');
    EXPECT_TRUE(absl::IsInvalidArgument(status)) << m.name << ": " << status;
    EXPECT_NE(status.message().find("trailing"), absl::string_view::npos) << status;
  }
}

TEST(StepCodecTest, HugeCountsAreRefusedBeforeAllocating) {
  // Four billion items, or one item claiming four billion tokens, in a few bytes: refused from
  // the bytes left, never by trying to allocate what the count says.
  const uint32_t huge = std::numeric_limits<uint32_t>::max();
  std::string items(reinterpret_cast<const char*>(&huge), sizeof(huge));
  EXPECT_TRUE(absl::IsInvalidArgument(DecodeVerifyItems(items).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(DecodeVerifyResponse(items).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(DecodeProposeItems(items).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(DecodeProposeResponse(items).status()));

  std::vector<spec::VerifyItem> one(1);
  std::string bytes = EncodeVerifyItems(one);
  std::memcpy(bytes.data() + 4 + 8, &huge, sizeof(huge));  // the tokens' count
  absl::StatusOr<std::vector<spec::VerifyItem>> decoded = DecodeVerifyItems(bytes);
  EXPECT_TRUE(absl::IsInvalidArgument(decoded.status())) << decoded.status();
}

}  // namespace
}  // namespace splitspec::rpc

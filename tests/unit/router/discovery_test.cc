// Verifier replicas from dns:/// names, without gRPC or DNS (fake resolver, fake verifiers):
// an address the name gains becomes a replica that takes requests, an address it loses has its
// requests moved to the others with their sessions there released, outputs stay the target's,
// and a failed resolution keeps the last answer.
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "gtest/gtest.h"
#include "router/verifier_discovery.h"
#include "tests/unit/router/router_harness.h"

namespace splitspec::router::testing {
namespace {

struct Discovered {
  std::vector<std::string> answer = {"10.0.0.1:50051"};
  bool resolver_fails = false;
  std::map<std::string, FakeVerifier*> verifiers;  // by address, made by the factory
  std::unique_ptr<VerifierDiscovery> discovery;
  FakeDrafter drafter;
  VirtualClock clock;
  std::unique_ptr<RouterCore> core;
  std::map<RequestId, Collected> out;

  explicit Discovered(const std::string& targets) {
    drafter.verifier = nullptr;  // sessions are spread over several verifiers
    auto made = VerifierDiscovery::Create(
        targets,
        [this](const std::string& address, const std::string&) {
          auto v = std::make_unique<FakeVerifier>();
          verifiers[address] = v.get();
          return std::unique_ptr<VerifierClient>(std::move(v));
        },
        [this](const std::string&) -> absl::StatusOr<std::vector<std::string>> {
          if (resolver_fails) return absl::UnavailableError("no DNS");
          return answer;
        });
    EXPECT_TRUE(made.ok()) << made.status();
    discovery = std::move(*made);
    auto p = MakePolicy("static:3", nlohmann::json::object());
    core = std::make_unique<RouterCore>(RouterOptions{}, discovery->initial(), DrafterPools{{"pool0", &drafter}},
                                        std::move(*p), LatencyModel(), &clock);
  }
  RequestId Submit(int32_t seed, int32_t max_tokens) { return SubmitCollected(*core, &out, seed, max_tokens); }
  // Steps with the virtual clock moving, so new replicas get probed.
  void Steps(int n) {
    for (int i = 0; i < n; ++i) {
      core->RunStep();
      clock.Advance(0.3);
    }
  }
  // Probes run on threads of their own: step until the up replicas hold `blocks` of KV.
  void StepUntilUpBlocks(int32_t blocks) {
    for (int i = 0; i < 100000 && core->Snapshot().total_blocks != blocks; ++i) {
      Steps(1);
      std::this_thread::yield();
    }
    ASSERT_EQ(core->Snapshot().total_blocks, blocks);
  }
};

TEST(VerifierDiscoveryTest, ReplicasFollowTheNameWithoutLosingARequest) {
  Discovered d("dns:///verifier:50051");
  ASSERT_TRUE(d.core->Init().ok());
  std::vector<RequestId> ids;
  for (int i = 0; i < 6; ++i) ids.push_back(d.Submit(60 + i, 40));
  d.Steps(4);
  FakeVerifier* first = d.verifiers.at("10.0.0.1:50051");
  EXPECT_EQ(first->sessions.size(), 6u);

  // A second pod: new requests land on it once it answered its probe.
  d.answer = {"10.0.0.1:50051", "10.0.0.2:50051"};
  d.discovery->Refresh(d.core.get());
  d.StepUntilUpBlocks(2 * 4096);
  ASSERT_TRUE(d.verifiers.count("10.0.0.2:50051"));
  FakeVerifier* second = d.verifiers.at("10.0.0.2:50051");
  for (int i = 0; i < 6; ++i) ids.push_back(d.Submit(70 + i, 40));
  d.Steps(2);
  EXPECT_FALSE(second->sessions.empty());

  // DNS fails for a while: nothing changes.
  d.resolver_fails = true;
  d.discovery->Refresh(d.core.get());
  d.Steps(2);
  EXPECT_FALSE(first->sessions.empty());

  // The first pod goes away: its requests move to the second and go on.
  d.resolver_fails = false;
  d.answer = {"10.0.0.2:50051"};
  d.discovery->Refresh(d.core.get());
  d.Steps(1);
  EXPECT_TRUE(first->sessions.empty()) << "sessions on the removed replica were not released";
  for (int i = 0; i < 20000 && !d.core->Idle(); ++i) d.Steps(1);
  ASSERT_TRUE(d.core->Idle());
  for (size_t i = 0; i < ids.size(); ++i) {
    const Collected& c = d.out[ids[i]];
    EXPECT_EQ(c.final_event.finish_reason, FinishReason::kLength) << c.final_event.status;
    const int32_t seed = i < 6 ? 60 + static_cast<int32_t>(i) : 70 + static_cast<int32_t>(i) - 6;
    EXPECT_EQ(c.tokens, ReferenceGeneration(Prompt(seed, 9), 40)) << "request " << i;
  }
  EXPECT_TRUE(second->protocol_errors.empty()) << second->protocol_errors[0];
  // The removed replica is never used again.
  const int prefills_before = first->prefill_calls;
  d.Submit(99, 8);
  for (int i = 0; i < 200 && !d.core->Idle(); ++i) d.Steps(1);
  EXPECT_EQ(first->prefill_calls, prefills_before);
}

TEST(VerifierDiscoveryTest, PlainAddressesAreFixedAndNamesMustResolveAtStart) {
  Discovered plain("127.0.0.1:1,127.0.0.1:2");
  EXPECT_EQ(plain.discovery->initial().size(), 2u);
  EXPECT_FALSE(plain.discovery->has_names());
  auto failing = VerifierDiscovery::Create(
      "dns:///nowhere:1", [](const std::string&, const std::string&) { return std::unique_ptr<VerifierClient>(new FakeVerifier()); },
      [](const std::string&) -> absl::StatusOr<std::vector<std::string>> { return absl::UnavailableError("no"); });
  EXPECT_FALSE(failing.ok());
  auto empty = VerifierDiscovery::Create(
      "", [](const std::string&, const std::string&) { return std::unique_ptr<VerifierClient>(new FakeVerifier()); },
      [](const std::string& t) -> absl::StatusOr<std::vector<std::string>> { return std::vector<std::string>{t}; });
  EXPECT_TRUE(absl::IsInvalidArgument(empty.status()));
}

}  // namespace
}  // namespace splitspec::router::testing

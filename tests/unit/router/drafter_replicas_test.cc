// Drafter pools over several replicas and replica lists with dns:/// names, without gRPC or
// DNS (fake drafters, a fake resolver): the address diffing, how a pool spreads requests and
// moves them off a failed or departed replica, and pools that follow their name's addresses
// while requests run (no request lost, every output the target's).
#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "router/drafter_discovery.h"
#include "router/replica_addresses.h"
#include "router/replicated_drafter.h"
#include "tests/unit/router/router_harness.h"

namespace splitspec::router::testing {
namespace {

using Addresses = std::vector<std::string>;

// A resolver answering from a table; a name missing from it does not resolve.
struct FakeDns {
  std::map<std::string, Addresses> answers;
  ReplicaAddresses::Resolver resolver() {
    return [this](const std::string& target) -> absl::StatusOr<Addresses> {
      if (target.find(':', 7) == std::string::npos) return absl::InvalidArgumentError("no port");
      auto it = answers.find(target);
      if (it == answers.end()) return absl::UnavailableError("no such name");
      return it->second;
    };
  }
};

TEST(ReplicaAddressesTest, NamesAreResolvedAgainAndOnlyTheirChangesReported) {
  FakeDns dns;
  dns.answers["dns:///verifier:1"] = {"10.0.0.2:1", "10.0.0.1:1", "a:1"};
  auto list = ReplicaAddresses::Create("a:1, dns:///verifier:1,b:2", dns.resolver());
  ASSERT_TRUE(list.ok()) << list.status();
  EXPECT_TRUE(list->has_names());
  EXPECT_EQ(list->current(), (Addresses{"a:1", "10.0.0.1:1", "10.0.0.2:1", "b:2"}));

  dns.answers["dns:///verifier:1"] = {"10.0.0.3:1", "10.0.0.2:1"};
  ReplicaAddresses::Change change = list->Refresh();
  EXPECT_EQ(change.added, (Addresses{"10.0.0.3:1"}));
  EXPECT_EQ(change.removed, (Addresses{"10.0.0.1:1"}));  // a:1 stays: the plain entry names it
  EXPECT_EQ(list->current(), (Addresses{"a:1", "10.0.0.2:1", "10.0.0.3:1", "b:2"}));
  EXPECT_TRUE(list->Refresh().empty());

  // A failed or empty answer keeps the last one.
  dns.answers.erase("dns:///verifier:1");
  EXPECT_TRUE(list->Refresh().empty());
  dns.answers["dns:///verifier:1"] = {};
  EXPECT_TRUE(list->Refresh().empty());
  EXPECT_EQ(list->current().size(), 4u);

  // What a worker's certificate must name: the Service for its pods, the host for the others.
  EXPECT_EQ(list->ServerNameOf("10.0.0.3:1"), "verifier");
  EXPECT_EQ(list->ServerNameOf("a:1"), "");  // listed plainly first
  EXPECT_EQ(list->ServerNameOf("10.9.9.9:1"), "");
}

TEST(ReplicaAddressesTest, StartRules) {
  FakeDns dns;
  EXPECT_TRUE(absl::IsInvalidArgument(ReplicaAddresses::Create("", dns.resolver()).status()));
  EXPECT_TRUE(absl::IsInvalidArgument(ReplicaAddresses::Create(" , ", dns.resolver()).status()));
  // Unresolvable: fatal where a replica is needed at start, an empty start otherwise.
  EXPECT_TRUE(
      absl::IsUnavailable(ReplicaAddresses::Create("dns:///later:1", dns.resolver()).status()));
  auto later =
      ReplicaAddresses::Create("dns:///later:1", dns.resolver(), /*names_must_resolve=*/false);
  ASSERT_TRUE(later.ok()) << later.status();
  EXPECT_TRUE(later->current().empty());
  dns.answers["dns:///later:1"] = {"10.0.0.9:1"};
  EXPECT_EQ(later->Refresh().added, (Addresses{"10.0.0.9:1"}));
  // A malformed name is refused either way.
  EXPECT_TRUE(absl::IsInvalidArgument(
      ReplicaAddresses::Create("dns:///noport", dns.resolver(), /*names_must_resolve=*/false)
          .status()));
  auto plain = ReplicaAddresses::Create("x:1,x:1", dns.resolver());
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE(plain->has_names());
  EXPECT_EQ(plain->current(), (Addresses{"x:1"}));
}

spec::ProposeItem Item(spec::RequestId id, int32_t known_length, std::vector<int32_t> new_tokens) {
  spec::ProposeItem item;
  item.id = id;
  item.known_length = known_length;
  item.new_tokens = std::move(new_tokens);
  item.shape.depth = 2;
  return item;
}

std::map<spec::RequestId, absl::Status> Statuses(const spec::ProposeResponse& response) {
  std::map<spec::RequestId, absl::Status> out;
  for (const spec::ProposeResult& result : response.results) out[result.id] = result.status;
  return out;
}

TEST(ReplicatedDrafterTest, SpreadsRequestsAndKeepsEachOnItsReplica) {
  FakeDrafter a(0.9, 1), b(0.9, 2);
  VirtualClock clock;
  ReplicatedDrafter pool({&a, &b}, &clock, 1.0);
  auto first =
      pool.Propose({Item(1, 0, {5, 6}), Item(2, 0, {5}), Item(3, 0, {7}), Item(4, 0, {8})});
  ASSERT_TRUE(first.ok()) << first.status();
  EXPECT_EQ(first->results.size(), 4u);
  EXPECT_EQ(a.sessions.size(), 2u);
  EXPECT_EQ(b.sessions.size(), 2u);
  const DrafterClient* home = pool.ReplicaOf(1);
  ASSERT_NE(home, nullptr);
  // The next step's items go where their sessions are, with what the session lacks.
  auto second = pool.Propose({Item(1, 2, {9}), Item(2, 1, {4})});
  ASSERT_TRUE(second.ok());
  for (const auto& [id, status] : Statuses(*second)) EXPECT_TRUE(status.ok()) << id << status;
  EXPECT_EQ(pool.ReplicaOf(1), home);
  const FakeDrafter* home_fake = static_cast<const FakeDrafter*>(home);
  EXPECT_EQ(home_fake->sessions.at(1), (std::vector<int32_t>{5, 6, 9}));
  EXPECT_TRUE(a.protocol_errors.empty() && b.protocol_errors.empty());
}

TEST(ReplicatedDrafterTest, AFailedReplicaFailsOnlyItsItemsAndItsRequestsMove) {
  FakeDrafter a(0.9, 1), b(0.9, 2);
  VirtualClock clock;
  ReplicatedDrafter pool({&a, &b}, &clock, 1.0);
  ASSERT_TRUE(
      pool.Propose({Item(1, 0, {5}), Item(2, 0, {5}), Item(3, 0, {5}), Item(4, 0, {5})}).ok());
  ASSERT_EQ(pool.ReplicaOf(1), &a);
  ASSERT_EQ(pool.ReplicaOf(2), &b);
  a.down = true;
  auto failed = pool.Propose({Item(1, 1, {6}), Item(2, 1, {6}), Item(3, 1, {6}), Item(4, 1, {6})});
  ASSERT_TRUE(failed.ok()) << "one replica's failure must not fail the other's items";
  std::map<spec::RequestId, absl::Status> statuses = Statuses(*failed);
  EXPECT_TRUE(absl::IsUnavailable(statuses[1]));
  EXPECT_TRUE(absl::IsUnavailable(statuses[3]));
  EXPECT_TRUE(statuses[2].ok());
  EXPECT_TRUE(statuses[4].ok());

  // A moved request whose item still carries a known_length is answered by the pool itself:
  // the router resends its whole history, which then goes to the new replica.
  const int b_calls = b.calls;
  auto moved = pool.Propose({Item(1, 2, {7})});
  ASSERT_TRUE(moved.ok());
  EXPECT_TRUE(absl::IsFailedPrecondition(Statuses(*moved)[1]));
  EXPECT_EQ(b.calls, b_calls);
  EXPECT_EQ(pool.ReplicaOf(1), &b);
  auto resent = pool.Propose({Item(1, 0, {5, 6, 7})});
  ASSERT_TRUE(resent.ok());
  EXPECT_TRUE(Statuses(*resent)[1].ok());
  EXPECT_EQ(b.sessions.at(1), (std::vector<int32_t>{5, 6, 7}));

  // Every replica down: a call-level error at once.
  b.down = true;
  EXPECT_TRUE(absl::IsUnavailable(pool.Propose({Item(2, 0, {5})}).status()));
  const int calls_before = a.calls + b.calls;
  EXPECT_TRUE(absl::IsUnavailable(pool.Propose({Item(2, 0, {5})}).status()));
  EXPECT_EQ(a.calls + b.calls, calls_before)
      << "down replicas are not called before their retry time";

  // After the retry time a replica takes requests again; Release reaches the replicas that
  // hold sessions and are up.
  a.down = b.down = false;
  clock.Advance(1.5);
  ASSERT_TRUE(pool.Propose({Item(2, 0, {5})}).ok());
  ASSERT_TRUE(pool.Release({1, 2, 3, 4}).ok());
  EXPECT_TRUE(a.sessions.empty());
  EXPECT_TRUE(b.sessions.empty());
  EXPECT_TRUE(a.protocol_errors.empty() && b.protocol_errors.empty());
}

TEST(ReplicatedDrafterTest, JoiningReplicasTakeNewRequestsAndLeavingOnesAreReleased) {
  FakeDrafter a(0.9, 1), b(0.9, 2), c(0.9, 3);
  VirtualClock clock;
  ReplicatedDrafter pool({&a, &b}, &clock, 1.0);
  ASSERT_TRUE(
      pool.Propose({Item(1, 0, {5}), Item(2, 0, {5}), Item(3, 0, {5}), Item(4, 0, {5})}).ok());
  pool.UpdateReplicas({&c, &a}, {});  // a is already there
  ASSERT_TRUE(pool.Propose({Item(5, 0, {5}), Item(6, 0, {5})}).ok());
  EXPECT_EQ(pool.size(), 3);
  EXPECT_EQ(pool.ReplicaOf(5), &c);
  EXPECT_EQ(pool.ReplicaOf(6), &c);

  pool.UpdateReplicas({}, {&b});
  ASSERT_TRUE(pool.Propose({Item(1, 1, {6}), Item(2, 1, {6})}).ok());
  EXPECT_EQ(pool.size(), 2);
  EXPECT_TRUE(b.sessions.empty()) << "the departing replica was not told to release";
  EXPECT_EQ(b.released, (std::set<spec::RequestId>{2, 4}));
  EXPECT_NE(pool.ReplicaOf(2), &b);
  const int b_calls = b.calls;
  ASSERT_TRUE(pool.Propose({Item(2, 0, {5, 6}), Item(4, 0, {5}), Item(7, 0, {5})}).ok());
  ASSERT_TRUE(pool.Release({1, 2, 3, 4, 5, 6, 7}).ok());
  EXPECT_EQ(b.calls, b_calls);
  EXPECT_TRUE(a.sessions.empty());
  EXPECT_TRUE(c.sessions.empty());
}

TEST(DrafterDiscoveryTest, PoolsFromFlags) {
  FakeDns dns;
  VirtualClock clock;
  auto make = [](const std::string&, const std::string&) {
    return std::unique_ptr<DrafterClient>(new FakeDrafter());
  };
  auto one = DrafterDiscovery::Create({"x:1"}, make, dns.resolver(), &clock, 1.0);
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_EQ((*one)->pools().count("default"), 1u);
  EXPECT_EQ((*one)->replicated("default"), nullptr);  // one fixed address: the client itself
  EXPECT_FALSE((*one)->has_names());
  auto two = DrafterDiscovery::Create({"x:1", "ngram=y:1,z:1"}, make, dns.resolver(), &clock, 1.0);
  ASSERT_TRUE(two.ok()) << two.status();
  EXPECT_EQ((*two)->pools().count("d0"), 1u);
  ASSERT_NE((*two)->replicated("ngram"), nullptr);
  EXPECT_EQ((*two)->replicated("ngram")->size(), 2);
  for (const std::vector<std::string>& bad : std::vector<std::vector<std::string>>{
           {"a=x:1", "a=y:1"}, {"=x:1"}, {"a="}, {"a=dns:///noport"}}) {
    EXPECT_TRUE(absl::IsInvalidArgument(
        DrafterDiscovery::Create(bad, make, dns.resolver(), &clock, 1.0).status()))
        << bad[0];
  }
}

// A RouterCore over one verifier and a drafter pool named by DNS.
struct DiscoveredPool {
  FakeDns dns;
  std::map<std::string, FakeDrafter*> drafters;  // by address, made by the factory
  std::unique_ptr<DrafterDiscovery> discovery;
  FakeVerifier verifier;
  VirtualClock clock;
  std::unique_ptr<RouterCore> core;
  std::map<RequestId, Collected> out;

  explicit DiscoveredPool(Addresses answer, RouterOptions options = {}) {
    if (!answer.empty()) dns.answers["dns:///drafter:50052"] = std::move(answer);
    // The drafters' state is checked against the verifier's, except with the pipeline, whose
    // drafters are called while the verifier runs and hold hypothetical tokens by design.
    const bool cross_check = !options.pipeline;
    auto made = DrafterDiscovery::Create(
        {"ngram=dns:///drafter:50052"},
        [this, cross_check](const std::string& address, const std::string&) {
          auto d = std::make_unique<FakeDrafter>(0.8, drafters.size() + 1);
          if (cross_check) d->verifier = &verifier;
          drafters[address] = d.get();
          return std::unique_ptr<DrafterClient>(std::move(d));
        },
        dns.resolver(), &clock, 0.5);
    EXPECT_TRUE(made.ok()) << made.status();
    discovery = std::move(*made);
    auto p = MakePolicy("static:3", nlohmann::json::object());
    core = std::make_unique<RouterCore>(std::move(options), &verifier, discovery->pools(),
                                        std::move(*p), LatencyModel(), &clock);
  }
  void Steps(int n) {
    for (int i = 0; i < n; ++i) {
      core->RunStep();
      clock.Advance(0.1);
    }
  }
  FakeDrafter* at(const std::string& address) {
    return drafters.count(address) ? drafters.at(address) : nullptr;
  }
  void ExpectOutputs(const std::map<RequestId, int32_t>& seeds, int32_t max_tokens) {
    for (const auto& [id, seed] : seeds) {
      const Collected& c = out[id];
      EXPECT_EQ(c.final_event.finish_reason, FinishReason::kLength) << c.final_event.status;
      EXPECT_EQ(c.tokens, ReferenceGeneration(Prompt(seed, 9), max_tokens)) << "seed " << seed;
    }
  }
};

// With and without the pipeline (drafts made ahead while the target verifies).
class DrafterDiscoveryWhileRunningTest : public ::testing::TestWithParam<bool> {};

TEST_P(DrafterDiscoveryWhileRunningTest, APoolFollowsItsNameWhileRequestsRun) {
  RouterOptions options;
  options.pipeline = GetParam();
  DiscoveredPool t({"10.0.1.1:50052"}, options);
  ASSERT_TRUE(t.core->Init().ok());
  std::map<RequestId, int32_t> seeds;
  for (int i = 0; i < 6; ++i) seeds[SubmitCollected(*t.core, &t.out, 60 + i, 48)] = 60 + i;
  t.Steps(4);
  FakeDrafter* first = t.at("10.0.1.1:50052");
  ASSERT_NE(first, nullptr);
  EXPECT_EQ(first->sessions.size(), 6u);

  // A second pod: new requests draft on it.
  t.dns.answers["dns:///drafter:50052"] = {"10.0.1.1:50052", "10.0.1.2:50052"};
  t.discovery->Refresh();
  FakeDrafter* second = t.at("10.0.1.2:50052");
  ASSERT_NE(second, nullptr);
  for (int i = 0; i < 6; ++i) seeds[SubmitCollected(*t.core, &t.out, 70 + i, 48)] = 70 + i;
  t.Steps(3);
  EXPECT_EQ(second->sessions.size(), 6u) << "the new replica takes the new requests";
  EXPECT_EQ(first->sessions.size(), 6u) << "running requests stay where their sessions are";

  // The first pod goes: its requests move to the second and keep drafting there.
  t.dns.answers["dns:///drafter:50052"] = {"10.0.1.2:50052"};
  t.discovery->Refresh();
  t.Steps(1);
  EXPECT_TRUE(first->sessions.empty()) << "sessions on the departed replica were not released";
  const int first_calls = first->calls;
  const int64_t proposed_before = second->tokens_proposed;
  for (int i = 0; i < 20000 && !t.core->Idle(); ++i) t.Steps(1);
  ASSERT_TRUE(t.core->Idle());
  t.ExpectOutputs(seeds, 48);
  EXPECT_EQ(first->calls, first_calls) << "a departed replica is never called again";
  EXPECT_GT(second->tokens_proposed, proposed_before);
  EXPECT_TRUE(second->sessions.empty());  // released as the requests finished
  for (const auto& [address, drafter] : t.drafters) {
    EXPECT_TRUE(drafter->protocol_errors.empty()) << address << ": " << drafter->protocol_errors[0];
  }
}

INSTANTIATE_TEST_SUITE_P(Pipeline, DrafterDiscoveryWhileRunningTest, ::testing::Bool());

TEST(DrafterDiscoveryTest, ANameWithoutAddressesYetDecodesWithoutDraftsUntilItResolves) {
  DiscoveredPool t({});
  ASSERT_TRUE(t.core->Init().ok());
  std::map<RequestId, int32_t> seeds;
  seeds[SubmitCollected(*t.core, &t.out, 3, 24)] = 3;
  t.Steps(6);
  EXPECT_TRUE(t.drafters.empty());
  t.dns.answers["dns:///drafter:50052"] = {"10.0.1.5:50052"};
  t.discovery->Refresh();
  seeds[SubmitCollected(*t.core, &t.out, 4, 24)] = 4;
  for (int i = 0; i < 20000 && !t.core->Idle(); ++i) t.Steps(1);
  ASSERT_TRUE(t.core->Idle());
  t.ExpectOutputs(seeds, 24);
  ASSERT_NE(t.at("10.0.1.5:50052"), nullptr);
  EXPECT_GT(t.at("10.0.1.5:50052")->tokens_proposed, 0);
}

}  // namespace
}  // namespace splitspec::router::testing

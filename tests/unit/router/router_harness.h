// A RouterCore wired to the in-process fakes, driven step by step from the test thread.
#ifndef SPLITSPEC_TESTS_UNIT_ROUTER_ROUTER_HARNESS_H_
#define SPLITSPEC_TESTS_UNIT_ROUTER_ROUTER_HARNESS_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "gtest/gtest.h"
#include "router/clock.h"
#include "router/policy.h"
#include "router/router_core.h"
#include "tests/unit/router/fake_workers.h"

namespace splitspec::router::testing {

struct Collected {
  std::vector<int32_t> tokens;
  int events = 0;
  bool finished = false;
  StreamEvent final_event;
};

class Harness {
 public:
  explicit Harness(const std::string& policy, RouterOptions options = {},
                   nlohmann::json config = nlohmann::json::object(), int n_drafters = 1) {
    for (int i = 0; i < n_drafters; ++i) {
      drafters.push_back(std::make_unique<FakeDrafter>(0.7, 1 + i));
      drafters.back()->verifier = &verifier;
    }
    Build(policy, std::move(options), std::move(config));
  }

  void Build(const std::string& policy, RouterOptions options, nlohmann::json config) {
    auto p = MakePolicy(policy, config);
    EXPECT_TRUE(p.ok()) << p.status();
    DrafterPools pools;
    for (size_t i = 0; i < drafters.size(); ++i) {
      pools[pool_names.size() > i ? pool_names[i] : "pool" + std::to_string(i)] = drafters[i].get();
    }
    core = std::make_unique<RouterCore>(std::move(options), &verifier, pools, std::move(*p),
                                        LatencyModel(), &clock);
  }

  absl::StatusOr<RequestId> Submit(std::vector<int32_t> prompt, int32_t max_tokens,
                                   GenerateRequest extra = {}) {
    extra.prompt = std::move(prompt);
    extra.max_tokens = max_tokens;
    return core->Submit(std::move(extra), [this](const StreamEvent& e) {
      Collected& c = out[e.id];
      EXPECT_FALSE(c.finished) << "event after the final one for " << e.id;
      ++c.events;
      c.tokens.insert(c.tokens.end(), e.tokens.begin(), e.tokens.end());
      if (e.finished) {
        c.finished = true;
        c.final_event = e;
      }
    });
  }

  // Runs steps until the core is idle; fails the test if that takes more than max_steps.
  void RunUntilIdle(int max_steps = 20000) {
    for (int i = 0; i < max_steps && !core->Idle(); ++i) core->RunStep();
    EXPECT_TRUE(core->Idle());
  }

  FakeVerifier verifier;
  std::vector<std::unique_ptr<FakeDrafter>> drafters;
  std::vector<std::string> pool_names;
  VirtualClock clock;
  std::unique_ptr<RouterCore> core;
  std::map<RequestId, Collected> out;
};

inline std::vector<int32_t> Prompt(int32_t seed, int32_t len) {
  std::vector<int32_t> p;
  for (int32_t i = 0; i < len; ++i) p.push_back((seed * 131 + i * 29 + 5) % kFakeVocab);
  return p;
}

// Submits Prompt(seed, 9) for `max_tokens` to `core`, collecting its events into (*out)[id].
inline RequestId SubmitCollected(RouterCore& core, std::map<RequestId, Collected>* out, int32_t seed,
                                 int32_t max_tokens) {
  GenerateRequest request;
  request.prompt = Prompt(seed, 9);
  request.max_tokens = max_tokens;
  auto id = core.Submit(std::move(request), [out](const StreamEvent& e) {
    Collected& c = (*out)[e.id];
    EXPECT_FALSE(c.finished);
    c.tokens.insert(c.tokens.end(), e.tokens.begin(), e.tokens.end());
    if (e.finished) {
      c.finished = true;
      c.final_event = e;
    }
  });
  EXPECT_TRUE(id.ok()) << id.status();
  return id.ok() ? *id : 0;
}

}  // namespace splitspec::router::testing

#endif  // SPLITSPEC_TESTS_UNIT_ROUTER_ROUTER_HARNESS_H_

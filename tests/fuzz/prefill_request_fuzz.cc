// Fuzz target: a PrefillRequest (PrefillItems: request id, prompt tokens, sampling params).
// Conversion to core PrefillItems round-trips (top_p 0 read as 1 stays 1), and the sampling
// check the verifier applies accepts only params the sampler can use.
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <vector>

#include "common/rpc/convert.h"
#include "tests/fuzz/rpc_fuzz_util.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  splitspec::v1::PrefillRequest proto;
  if (!proto.ParseFromArray(data, static_cast<int>(size))) return 0;
  const std::vector<splitspec::spec::PrefillItem> items = splitspec::rpc::FromProto(proto);
  FUZZ_CHECK(items.size() == static_cast<size_t>(proto.items_size()));
  splitspec::v1::PrefillRequest written;
  splitspec::rpc::ToProto(items, &written);
  const std::vector<splitspec::spec::PrefillItem> again = splitspec::rpc::FromProto(written);
  FUZZ_CHECK(again.size() == items.size());
  for (size_t i = 0; i < items.size(); ++i) {
    FUZZ_CHECK(again[i].id == items[i].id && again[i].tokens == items[i].tokens);
    FUZZ_CHECK(splitspec::fuzz::SameSampling(again[i].sampling, items[i].sampling));
    const splitspec::engine::SamplingParams& params = items[i].sampling;
    FUZZ_CHECK(params.top_p != 0.0f);
    if (!splitspec::engine::ValidateSamplingParams(params).ok()) continue;
    // Usable params give a distribution over a small vocabulary that sums to 1.
    const std::vector<float> logits = {0.5f, -1.0f, 2.0f, 0.0f, 3.5f, -7.0f, 1.0f, 1.0f};
    const std::vector<float> probs = splitspec::engine::ComputeProbabilities(logits, params);
    double sum = 0;
    for (float p : probs) {
      FUZZ_CHECK(std::isfinite(p) && p >= 0.0f);
      sum += p;
    }
    FUZZ_CHECK(std::fabs(sum - 1.0) < 1e-4);
  }
  return 0;
}

// The seed a sampled request runs with. An unset seed means a fresh one per request, so that
// unseeded requests never share one random stream; whoever chooses it reports it back (the
// router in its final message, `splitspec generate` in its summary line) so that sending it
// as the seed reproduces the output.
#ifndef SPLITSPEC_COMMON_ENGINE_SAMPLING_SEED_H_
#define SPLITSPEC_COMMON_ENGINE_SAMPLING_SEED_H_

#include <cstdint>
#include <optional>
#include <string_view>

namespace splitspec::engine {

// `requested` when set; otherwise a fresh seed from a process-wide generator seeded from the
// operating system's entropy. Thread-safe.
uint64_t ChooseSeed(std::optional<uint64_t> requested);

// The seed of one named stream of a seeded whole (a random model's tensor, a benchmark's
// request): a function of `seed` and `name` only, the same on every platform (std::hash is
// not), so a stream does not change when others are added or removed.
uint64_t NamedSeed(uint64_t seed, std::string_view name);

}  // namespace splitspec::engine

#endif  // SPLITSPEC_COMMON_ENGINE_SAMPLING_SEED_H_

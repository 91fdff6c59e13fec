// The seed a sampled request runs with. An unset seed means a fresh one per request, so that
// unseeded requests never share one random stream; whoever chooses it reports it back (the
// router in its final message, `splitspec generate` in its summary line) so that sending it
// as the seed reproduces the output.
#ifndef SPLITSPEC_COMMON_ENGINE_SAMPLING_SEED_H_
#define SPLITSPEC_COMMON_ENGINE_SAMPLING_SEED_H_

#include <cstdint>
#include <optional>

namespace splitspec::engine {

// `requested` when set; otherwise a fresh seed from a process-wide generator seeded from the
// operating system's entropy. Thread-safe.
uint64_t ChooseSeed(std::optional<uint64_t> requested);

}  // namespace splitspec::engine

#endif  // SPLITSPEC_COMMON_ENGINE_SAMPLING_SEED_H_

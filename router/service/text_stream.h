// Turns a request's stream of generated token ids into text deltas: incremental
// detokenization (byte pieces that only form a character together wait for each other) and
// stop strings (text that might be the start of a stop string is held back until it is
// known not to be; the text ends right before a stop string that completes).
//
// Not thread-safe: one per streaming request.
#ifndef SPLITSPEC_ROUTER_SERVICE_TEXT_STREAM_H_
#define SPLITSPEC_ROUTER_SERVICE_TEXT_STREAM_H_

#include <cstdint>
#include <string>
#include <vector>

#include "common/engine/tokenizer/tokenizer.h"

namespace splitspec::router {

class TextStream {
 public:
  // `prompt` gives the context for the first token's leading space. `tokenizer` is not owned.
  TextStream(const engine::Tokenizer* tokenizer, std::vector<int32_t> prompt, std::vector<std::string> stop);

  // Text that can be shown after these new tokens (possibly empty). Once a stop string
  // matched, further tokens add nothing.
  std::string Add(const std::vector<int32_t>& tokens);
  // The held-back text at the end of the stream (none when a stop string matched).
  std::string Flush();
  bool stopped() const { return stopped_; }

 private:
  const engine::Tokenizer* tokenizer_;
  std::vector<int32_t> context_;  // prompt + generated tokens so far
  std::vector<std::string> stop_;
  std::string held_;  // decoded but not yet shown
  bool stopped_ = false;
};

}  // namespace splitspec::router

#endif  // SPLITSPEC_ROUTER_SERVICE_TEXT_STREAM_H_

// Token ids -> text deltas with stop-string hold-back (see text_stream.h).
#include "router/service/text_stream.h"

#include <algorithm>
#include <utility>

namespace splitspec::router {

TextStream::TextStream(const engine::Tokenizer* tokenizer, std::vector<int32_t> prompt,
                       std::vector<std::string> stop)
    : tokenizer_(tokenizer), context_(std::move(prompt)) {
  for (std::string& s : stop) {
    if (!s.empty()) stop_.push_back(std::move(s));
  }
}

std::string TextStream::Add(const std::vector<int32_t>& tokens) {
  if (stopped_) return "";
  for (int32_t token : tokens) {
    held_ += tokenizer_->DecodeIncremental(context_, token);
    context_.push_back(token);
  }
  // A completed stop string: show everything before its earliest occurrence, then nothing.
  size_t first = std::string::npos;
  for (const std::string& s : stop_) first = std::min(first, held_.find(s));
  if (first != std::string::npos) {
    stopped_ = true;
    std::string out = held_.substr(0, first);
    held_.clear();
    return out;
  }
  // Hold back the longest suffix that is a proper prefix of some stop string.
  size_t keep = 0;
  for (const std::string& s : stop_) {
    for (size_t n = std::min(s.size() - 1, held_.size()); n > keep; --n) {
      if (held_.compare(held_.size() - n, n, s, 0, n) == 0) {
        keep = n;
        break;
      }
    }
  }
  std::string out = held_.substr(0, held_.size() - keep);
  held_.erase(0, held_.size() - keep);
  return out;
}

std::string TextStream::Flush() {
  std::string out = stopped_ ? std::string() : std::move(held_);
  held_.clear();
  return out;
}

}  // namespace splitspec::router

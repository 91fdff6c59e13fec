// Parses a Jinja template into a syntax tree, with the whitespace rules Hugging Face renders
// chat templates with (trim_blocks and lstrip_blocks on, plus "-" markers).
#ifndef SPLITSPEC_COMMON_ENGINE_CHAT_TEMPLATE_JINJA_PARSER_H_
#define SPLITSPEC_COMMON_ENGINE_CHAT_TEMPLATE_JINJA_PARSER_H_

#include <string_view>

#include "absl/status/statusor.h"
#include "common/engine/chat_template/jinja_ast.h"

namespace splitspec::chat_template {

// Unsupported tags, filters-as-syntax or operators are errors naming them.
absl::StatusOr<NodeList> ParseTemplate(std::string_view source);

}  // namespace splitspec::chat_template

#endif  // SPLITSPEC_COMMON_ENGINE_CHAT_TEMPLATE_JINJA_PARSER_H_

// Renders a parsed template over variables held as JSON values: strings, numbers, lists,
// objects, plus Jinja's "undefined" for names and attributes that do not exist.
#ifndef SPLITSPEC_COMMON_ENGINE_CHAT_TEMPLATE_JINJA_RENDERER_H_
#define SPLITSPEC_COMMON_ENGINE_CHAT_TEMPLATE_JINJA_RENDERER_H_

#include <string>

#include "absl/status/statusor.h"
#include "common/engine/chat_template/jinja_ast.h"

namespace splitspec::chat_template {

// `variables` must be an object. raise_exception(msg) in the template, type errors and
// unknown filters/tests/methods are errors; output is bounded by `max_output_bytes`.
absl::StatusOr<std::string> RenderTemplate(const NodeList& nodes, const Json& variables,
                                           size_t max_output_bytes = 16 << 20);

}  // namespace splitspec::chat_template

#endif  // SPLITSPEC_COMMON_ENGINE_CHAT_TEMPLATE_JINJA_RENDERER_H_

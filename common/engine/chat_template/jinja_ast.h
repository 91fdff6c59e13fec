// The syntax tree of the Jinja subset chat templates use (see chat_template.h for the list).
#ifndef SPLITSPEC_COMMON_ENGINE_CHAT_TEMPLATE_JINJA_AST_H_
#define SPLITSPEC_COMMON_ENGINE_CHAT_TEMPLATE_JINJA_AST_H_

#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "nlohmann/json.hpp"

namespace splitspec::chat_template {

using Json = nlohmann::ordered_json;

struct Expr {
  enum Kind {
    kLiteral,    // value
    kName,       // name
    kList,       // args
    kDict,       // kwargs (keys as names)
    kAttr,       // args[0].name
    kIndex,      // args[0][args[1]]
    kSlice,      // args[0][args[1]:args[2]:args[3]] (kLiteral null for an empty part)
    kCall,       // args[0](args[1..], kwargs)
    kFilter,     // args[0] | name(args[1..])
    kTest,       // args[0] is [not] name(args[1..]); negate
    kUnary,      // op args[0]: "not", "-", "+"
    kBinary,     // args[0] op args[1]
    kConditional // args[1] if args[0] else args[2]
  } kind;
  Json value;
  std::string name;  // kName, kAttr, kFilter, kTest; kUnary/kBinary: the operator
  bool negate = false;
  std::vector<std::unique_ptr<Expr>> args;
  std::vector<std::pair<std::string, std::unique_ptr<Expr>>> kwargs;
};

struct Node {
  enum Kind {
    kText,    // text
    kOutput,  // {{ expr }}
    kIf,      // branches: (condition, body); else_body
    kFor,     // {% for targets in expr [if filter] %} body {% else %} else_body
    kSet,     // {% set target[.attr] = expr %}
  } kind;
  std::string text;
  std::unique_ptr<Expr> expr;
  std::unique_ptr<Expr> filter;  // kFor: optional "if" condition
  std::vector<std::string> targets;  // kFor: loop variables; kSet: name [, attribute]
  std::vector<std::pair<std::unique_ptr<Expr>, std::vector<std::unique_ptr<Node>>>> branches;
  std::vector<std::unique_ptr<Node>> body;
  std::vector<std::unique_ptr<Node>> else_body;
};

using NodeList = std::vector<std::unique_ptr<Node>>;

}  // namespace splitspec::chat_template

#endif  // SPLITSPEC_COMMON_ENGINE_CHAT_TEMPLATE_JINJA_AST_H_

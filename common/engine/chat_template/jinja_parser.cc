// Jinja parsing in three steps: the source is cut into text and tags (applying whitespace
// control), tag contents are tokenized, and a recursive-descent parser builds statements
// and expressions with Jinja's operator precedence. Errors are thrown as ParseError inside
// this file and returned as absl::Status at its edge.
#include "common/engine/chat_template/jinja_parser.h"

#include <cctype>
#include <stdexcept>

#include "absl/strings/str_cat.h"

namespace splitspec::chat_template {
namespace {

struct ParseError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

// ---- Step 1: text and tags -------------------------------------------------------------

struct Segment {
  enum Kind { kText, kOutput, kStatement } kind;
  std::string content;  // text, or the inside of the tag without markers
  size_t offset = 0;    // where the segment starts in the source (for messages)
};

// Length of the indentation before `open` when the tag at `open` is the first thing on its
// line and nothing of that line was consumed before `text_begin`; else npos.
size_t LeadingIndent(std::string_view source, size_t text_begin, size_t open) {
  const size_t newline = open == 0 ? std::string_view::npos : source.rfind('\n', open - 1);
  const size_t line_start = newline == std::string_view::npos ? 0 : newline + 1;
  if (line_start < text_begin) return std::string_view::npos;
  for (size_t i = line_start; i < open; ++i) {
    if (source[i] != ' ' && source[i] != '\t') return std::string_view::npos;
  }
  return open - line_start;
}

std::vector<Segment> Cut(std::string_view source) {
  std::vector<Segment> segments;
  size_t pos = 0;
  enum class Trim { kNone, kAll, kNewline } trim_next = Trim::kNone;
  while (pos <= source.size()) {
    size_t open = source.find('{', pos);
    while (open != std::string_view::npos && open + 1 < source.size() && source[open + 1] != '{' &&
           source[open + 1] != '%' && source[open + 1] != '#') {
      open = source.find('{', open + 1);
    }
    if (open != std::string_view::npos && open + 1 >= source.size()) open = std::string_view::npos;
    std::string text(source.substr(pos, (open == std::string_view::npos ? source.size() : open) - pos));
    if (trim_next == Trim::kAll) {
      size_t i = 0;
      while (i < text.size() && std::isspace(static_cast<unsigned char>(text[i]))) ++i;
      text.erase(0, i);
    } else if (trim_next == Trim::kNewline) {
      if (text.compare(0, 1, "\n") == 0) text.erase(0, 1);
      else if (text.compare(0, 2, "\r\n") == 0) text.erase(0, 2);
    }
    if (open == std::string_view::npos) {
      if (!text.empty()) segments.push_back({Segment::kText, text, pos});
      break;
    }
    const char kind = source[open + 1];
    const std::string close = kind == '{' ? "}}" : kind == '%' ? "%}" : "#}";
    size_t inner = open + 2;
    const bool strip_before = inner < source.size() && source[inner] == '-';
    const bool keep_before = inner < source.size() && source[inner] == '+';
    if (strip_before || keep_before) ++inner;
    // Find the closing marker outside string literals.
    size_t end = inner;
    char quote = 0;
    for (; end < source.size(); ++end) {
      const char c = source[end];
      if (kind == '#') {
        if (source.compare(end, 2, close) == 0) break;
        continue;
      }
      if (quote != 0) {
        if (c == '\\') ++end;
        else if (c == quote) quote = 0;
      } else if (c == '\'' || c == '"') {
        quote = c;
      } else if (source.compare(end, 2, close) == 0) {
        break;
      }
    }
    if (end >= source.size()) throw ParseError(absl::StrCat("unclosed tag at offset ", open));
    const bool strip_after = end > inner && source[end - 1] == '-';
    const size_t content_end = strip_after ? end - 1 : end;
    const bool block = kind != '{';
    if (strip_before) {
      size_t n = text.size();
      while (n > 0 && std::isspace(static_cast<unsigned char>(text[n - 1]))) --n;
      text.resize(n);
    } else if (const size_t indent = LeadingIndent(source, pos, open);
               block && !keep_before && indent != std::string_view::npos) {
      // lstrip_blocks: a block tag first on its line takes the indentation away.
      text.resize(text.size() >= indent ? text.size() - indent : 0);
    }
    if (!text.empty()) segments.push_back({Segment::kText, text, pos});
    if (kind != '#') {
      segments.push_back({kind == '{' ? Segment::kOutput : Segment::kStatement,
                          std::string(source.substr(inner, content_end - inner)), open});
    }
    trim_next = strip_after ? Trim::kAll : block ? Trim::kNewline : Trim::kNone;  // trim_blocks
    pos = end + 2;
  }
  return segments;
}

// ---- Step 2: tokens inside tags --------------------------------------------------------

struct Token {
  enum Kind { kName, kString, kNumber, kOp, kEnd } kind;
  std::string text;
  Json number;
};

std::vector<Token> Tokenize(const std::string& s) {
  std::vector<Token> tokens;
  size_t i = 0;
  while (i < s.size()) {
    const char c = s[i];
    if (std::isspace(static_cast<unsigned char>(c))) {
      ++i;
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      size_t j = i;
      while (j < s.size() && (std::isalnum(static_cast<unsigned char>(s[j])) || s[j] == '_')) ++j;
      tokens.push_back({Token::kName, s.substr(i, j - i), nullptr});
      i = j;
    } else if (std::isdigit(static_cast<unsigned char>(c))) {
      size_t j = i;
      bool is_float = false;
      while (j < s.size() && (std::isdigit(static_cast<unsigned char>(s[j])) ||
                              (s[j] == '.' && j + 1 < s.size() && std::isdigit(static_cast<unsigned char>(s[j + 1])) && !is_float))) {
        if (s[j] == '.') is_float = true;
        ++j;
      }
      const std::string digits = s.substr(i, j - i);
      tokens.push_back({Token::kNumber, digits, is_float ? Json(std::stod(digits)) : Json(std::stoll(digits))});
      i = j;
    } else if (c == '\'' || c == '"') {
      std::string value;
      size_t j = i + 1;
      for (; j < s.size() && s[j] != c; ++j) {
        if (s[j] != '\\' || j + 1 >= s.size()) {
          value.push_back(s[j]);
          continue;
        }
        const char e = s[++j];
        switch (e) {
          case 'n': value.push_back('\n'); break;
          case 't': value.push_back('\t'); break;
          case 'r': value.push_back('\r'); break;
          case '\\': value.push_back('\\'); break;
          case '\'': value.push_back('\''); break;
          case '"': value.push_back('"'); break;
          default: value.push_back('\\'); value.push_back(e); break;
        }
      }
      if (j >= s.size()) throw ParseError("unterminated string literal");
      tokens.push_back({Token::kString, value, nullptr});
      i = j + 1;
    } else {
      static const char* kOps[] = {"//", "**", "==", "!=", "<=", ">=", "(", ")", "[", "]", "{", "}", ".", ",", ":",
                                   "|", "+", "-", "*", "/", "%", "~", "<", ">", "="};
      bool found = false;
      for (const char* op : kOps) {
        if (s.compare(i, std::char_traits<char>::length(op), op) == 0) {
          tokens.push_back({Token::kOp, op, nullptr});
          i += std::char_traits<char>::length(op);
          found = true;
          break;
        }
      }
      if (!found) throw ParseError(absl::StrCat("unexpected character '", std::string(1, c), "'"));
    }
  }
  tokens.push_back({Token::kEnd, "", nullptr});
  return tokens;
}

// ---- Step 3: expressions ---------------------------------------------------------------

std::unique_ptr<Expr> MakeExpr(Expr::Kind kind) {
  auto e = std::make_unique<Expr>();
  e->kind = kind;
  return e;
}

class ExprParser {
 public:
  explicit ExprParser(std::vector<Token> tokens) : t_(std::move(tokens)) {}

  const Token& Peek(size_t ahead = 0) const { return t_[std::min(i_ + ahead, t_.size() - 1)]; }
  bool AtEnd() const { return Peek().kind == Token::kEnd; }
  bool IsOp(const char* op, size_t ahead = 0) const { return Peek(ahead).kind == Token::kOp && Peek(ahead).text == op; }
  bool IsName(const char* name, size_t ahead = 0) const { return Peek(ahead).kind == Token::kName && Peek(ahead).text == name; }
  void Expect(const char* op) {
    if (!IsOp(op)) throw ParseError(absl::StrCat("expected '", op, "' but found '", Peek().text, "'"));
    ++i_;
  }
  std::string ExpectName() {
    if (Peek().kind != Token::kName) throw ParseError(absl::StrCat("expected a name but found '", Peek().text, "'"));
    return t_[i_++].text;
  }
  void ExpectEnd() {
    if (!AtEnd()) throw ParseError(absl::StrCat("unexpected '", Peek().text, "'"));
  }

  // expr := or_expr ["if" or_expr ["else" expr]]
  std::unique_ptr<Expr> Expression() {
    auto value = Or();
    if (!IsName("if")) return value;
    ++i_;
    auto cond = MakeExpr(Expr::kConditional);
    cond->args.push_back(Or());
    cond->args.push_back(std::move(value));
    if (IsName("else")) {
      ++i_;
      cond->args.push_back(Expression());
    } else {
      auto undefined = MakeExpr(Expr::kName);
      undefined->name = "";  // an always-undefined name
      cond->args.push_back(std::move(undefined));
    }
    return cond;
  }

  std::unique_ptr<Expr> Binary(std::string op, std::unique_ptr<Expr> left, std::unique_ptr<Expr> right) {
    auto e = MakeExpr(Expr::kBinary);
    e->name = std::move(op);
    e->args.push_back(std::move(left));
    e->args.push_back(std::move(right));
    return e;
  }

  std::unique_ptr<Expr> Or() {
    auto left = And();
    while (IsName("or")) {
      ++i_;
      left = Binary("or", std::move(left), And());
    }
    return left;
  }
  std::unique_ptr<Expr> And() {
    auto left = Not();
    while (IsName("and")) {
      ++i_;
      left = Binary("and", std::move(left), Not());
    }
    return left;
  }
  std::unique_ptr<Expr> Not() {
    if (IsName("not")) {
      ++i_;
      auto e = MakeExpr(Expr::kUnary);
      e->name = "not";
      e->args.push_back(Not());
      return e;
    }
    return Compare();
  }
  std::unique_ptr<Expr> Compare() {
    auto left = Concat();
    while (true) {
      std::string op;
      if (Peek().kind == Token::kOp && (Peek().text == "==" || Peek().text == "!=" || Peek().text == "<" ||
                                        Peek().text == ">" || Peek().text == "<=" || Peek().text == ">=")) {
        op = t_[i_++].text;
      } else if (IsName("in")) {
        ++i_;
        op = "in";
      } else if (IsName("not") && IsName("in", 1)) {
        i_ += 2;
        op = "not in";
      } else {
        return left;
      }
      left = Binary(op, std::move(left), Concat());
    }
  }
  std::unique_ptr<Expr> Concat() {
    auto left = Additive();
    while (IsOp("~")) {
      ++i_;
      left = Binary("~", std::move(left), Additive());
    }
    return left;
  }
  std::unique_ptr<Expr> Additive() {
    auto left = Multiplicative();
    while (IsOp("+") || IsOp("-")) {
      const std::string op = t_[i_++].text;
      left = Binary(op, std::move(left), Multiplicative());
    }
    return left;
  }
  std::unique_ptr<Expr> Multiplicative() {
    auto left = Unary();
    while (IsOp("*") || IsOp("/") || IsOp("//") || IsOp("%")) {
      const std::string op = t_[i_++].text;
      left = Binary(op, std::move(left), Unary());
    }
    return left;
  }
  std::unique_ptr<Expr> Unary() {
    if (IsOp("-") || IsOp("+")) {
      auto e = MakeExpr(Expr::kUnary);
      e->name = t_[i_++].text;
      e->args.push_back(Unary());
      return e;
    }
    auto value = Postfix(Primary());
    if (IsOp("**")) throw ParseError("'**' is not supported");
    return value;
  }

  // Arguments after '(' up to ')': positional into e->args, name=value into e->kwargs.
  void Arguments(Expr* e) {
    Expect("(");
    while (!IsOp(")")) {
      if (Peek().kind == Token::kName && IsOp("=", 1)) {
        std::string name = t_[i_].text;
        i_ += 2;
        e->kwargs.emplace_back(std::move(name), Expression());
      } else {
        e->args.push_back(Expression());
      }
      if (!IsOp(",")) break;
      ++i_;
    }
    Expect(")");
  }

  std::unique_ptr<Expr> Postfix(std::unique_ptr<Expr> value) {
    while (true) {
      if (IsOp(".")) {
        ++i_;
        auto e = MakeExpr(Expr::kAttr);
        e->name = ExpectName();
        e->args.push_back(std::move(value));
        value = std::move(e);
      } else if (IsOp("[")) {
        ++i_;
        value = Subscript(std::move(value));
      } else if (IsOp("(")) {
        auto e = MakeExpr(Expr::kCall);
        e->args.push_back(std::move(value));
        Arguments(e.get());
        value = std::move(e);
      } else if (IsOp("|")) {
        ++i_;
        auto e = MakeExpr(Expr::kFilter);
        e->name = ExpectName();
        e->args.push_back(std::move(value));
        if (IsOp("(")) Arguments(e.get());
        value = std::move(e);
      } else if (IsName("is")) {
        ++i_;
        auto e = MakeExpr(Expr::kTest);
        if (IsName("not")) {
          ++i_;
          e->negate = true;
        }
        // "none", "true" and "false" are test names here, not literals.
        e->name = ExpectName();
        e->args.push_back(std::move(value));
        if (IsOp("(")) Arguments(e.get());
        value = std::move(e);
      } else {
        return value;
      }
    }
  }

  std::unique_ptr<Expr> Subscript(std::unique_ptr<Expr> value) {
    std::unique_ptr<Expr> parts[3];
    int part = 0;
    bool slice = false;
    while (!IsOp("]")) {
      if (IsOp(":")) {
        ++i_;
        slice = true;
        if (++part > 2) throw ParseError("bad slice");
        continue;
      }
      if (parts[part] != nullptr) throw ParseError("bad subscript");
      parts[part] = Expression();
    }
    Expect("]");
    auto e = MakeExpr(slice ? Expr::kSlice : Expr::kIndex);
    e->args.push_back(std::move(value));
    if (!slice) {
      if (parts[0] == nullptr) throw ParseError("empty subscript");
      e->args.push_back(std::move(parts[0]));
      return e;
    }
    for (auto& p : parts) {
      if (p == nullptr) {
        p = MakeExpr(Expr::kLiteral);
        p->value = nullptr;
      }
      e->args.push_back(std::move(p));
    }
    return e;
  }

  std::unique_ptr<Expr> Primary() {
    const Token& token = Peek();
    if (token.kind == Token::kString) {
      auto e = MakeExpr(Expr::kLiteral);
      e->value = token.text;
      ++i_;
      while (Peek().kind == Token::kString) e->value = e->value.get<std::string>() + t_[i_++].text;  // "a" "b"
      return e;
    }
    if (token.kind == Token::kNumber) {
      auto e = MakeExpr(Expr::kLiteral);
      e->value = token.number;
      ++i_;
      return e;
    }
    if (token.kind == Token::kName) {
      ++i_;
      auto e = MakeExpr(Expr::kLiteral);
      if (token.text == "true" || token.text == "True") e->value = true;
      else if (token.text == "false" || token.text == "False") e->value = false;
      else if (token.text == "none" || token.text == "None") e->value = nullptr;
      else {
        e->kind = Expr::kName;
        e->name = token.text;
      }
      return e;
    }
    if (IsOp("(")) {
      ++i_;
      auto inner = Expression();
      if (IsOp(",")) throw ParseError("tuples are not supported");
      Expect(")");
      return inner;
    }
    if (IsOp("[")) {
      ++i_;
      auto e = MakeExpr(Expr::kList);
      while (!IsOp("]")) {
        e->args.push_back(Expression());
        if (!IsOp(",")) break;
        ++i_;
      }
      Expect("]");
      return e;
    }
    if (IsOp("{")) {
      ++i_;
      auto e = MakeExpr(Expr::kDict);
      while (!IsOp("}")) {
        if (Peek().kind != Token::kString) throw ParseError("dict keys must be string literals");
        std::string key = t_[i_++].text;
        Expect(":");
        e->kwargs.emplace_back(std::move(key), Expression());
        if (!IsOp(",")) break;
        ++i_;
      }
      Expect("}");
      return e;
    }
    throw ParseError(absl::StrCat("unexpected '", token.text, "'"));
  }

  size_t position() const { return i_; }

 private:
  std::vector<Token> t_;
  size_t i_ = 0;
};

// ---- Statements ------------------------------------------------------------------------

class TemplateParser {
 public:
  explicit TemplateParser(std::vector<Segment> segments) : s_(std::move(segments)) {}

  NodeList Parse() {
    std::string stop;
    NodeList nodes = Block({}, &stop);
    if (!stop.empty()) throw ParseError(absl::StrCat("unexpected {% ", stop, " %}"));
    return nodes;
  }

 private:
  // Statements until one whose keyword is in `stops` (left for the caller in `*stop`,
  // its parser in `*tag`).
  NodeList Block(const std::vector<std::string>& stops, std::string* stop, std::unique_ptr<ExprParser>* tag = nullptr) {
    NodeList nodes;
    stop->clear();
    while (i_ < s_.size()) {
      const Segment& segment = s_[i_++];
      if (segment.kind == Segment::kText) {
        auto node = std::make_unique<Node>();
        node->kind = Node::kText;
        node->text = segment.content;
        nodes.push_back(std::move(node));
        continue;
      }
      auto parser = std::make_unique<ExprParser>(Tokenize(segment.content));
      if (segment.kind == Segment::kOutput) {
        auto node = std::make_unique<Node>();
        node->kind = Node::kOutput;
        node->expr = parser->Expression();
        parser->ExpectEnd();
        nodes.push_back(std::move(node));
        continue;
      }
      const std::string keyword = parser->ExpectName();
      for (const std::string& s : stops) {
        if (keyword == s) {
          *stop = keyword;
          if (tag != nullptr) *tag = std::move(parser);
          else parser->ExpectEnd();
          return nodes;
        }
      }
      if (keyword == "if") nodes.push_back(If(parser.get()));
      else if (keyword == "for") nodes.push_back(For(parser.get()));
      else if (keyword == "set") nodes.push_back(Set(parser.get()));
      else if (keyword == "generation" || keyword == "endgeneration") continue;  // training-only markers
      else throw ParseError(absl::StrCat("unsupported tag {% ", keyword, " %}"));
    }
    if (!stops.empty()) throw ParseError(absl::StrCat("missing {% ", stops.back(), " %}"));
    return nodes;
  }

  std::unique_ptr<Node> If(ExprParser* tag) {
    auto node = std::make_unique<Node>();
    node->kind = Node::kIf;
    auto condition = tag->Expression();
    tag->ExpectEnd();
    while (true) {
      std::string stop;
      std::unique_ptr<ExprParser> next;
      NodeList body = Block({"elif", "else", "endif"}, &stop, &next);
      node->branches.emplace_back(std::move(condition), std::move(body));
      if (stop == "elif") {
        condition = next->Expression();
        next->ExpectEnd();
        continue;
      }
      next->ExpectEnd();
      if (stop == "else") {
        node->else_body = Block({"endif"}, &stop);
      }
      return node;
    }
  }

  std::unique_ptr<Node> For(ExprParser* tag) {
    auto node = std::make_unique<Node>();
    node->kind = Node::kFor;
    node->targets.push_back(tag->ExpectName());
    while (tag->IsOp(",")) {
      tag->Expect(",");
      node->targets.push_back(tag->ExpectName());
    }
    if (!tag->IsName("in")) throw ParseError("expected 'in' in {% for %}");
    tag->ExpectName();
    // The iterable stops before a trailing "if" filter, so no conditional expression here.
    node->expr = tag->Or();
    if (tag->IsName("if")) {
      tag->ExpectName();
      node->filter = tag->Expression();
    }
    if (tag->IsName("recursive")) throw ParseError("recursive loops are not supported");
    tag->ExpectEnd();
    std::string stop;
    node->body = Block({"else", "endfor"}, &stop);
    if (stop == "else") node->else_body = Block({"endfor"}, &stop);
    return node;
  }

  std::unique_ptr<Node> Set(ExprParser* tag) {
    auto node = std::make_unique<Node>();
    node->kind = Node::kSet;
    node->targets.push_back(tag->ExpectName());
    if (tag->IsOp(".")) {
      tag->Expect(".");
      node->targets.push_back(tag->ExpectName());
    }
    if (!tag->IsOp("=")) throw ParseError("block {% set %} and tuple targets are not supported");
    tag->Expect("=");
    node->expr = tag->Expression();
    tag->ExpectEnd();
    return node;
  }

  std::vector<Segment> s_;
  size_t i_ = 0;
};

}  // namespace

absl::StatusOr<NodeList> ParseTemplate(std::string_view source) {
  try {
    return TemplateParser(Cut(source)).Parse();
  } catch (const ParseError& e) {
    return absl::InvalidArgumentError(absl::StrCat("chat template: ", e.what()));
  } catch (const std::exception& e) {  // number conversions
    return absl::InvalidArgumentError(absl::StrCat("chat template: ", e.what()));
  }
}

}  // namespace splitspec::chat_template

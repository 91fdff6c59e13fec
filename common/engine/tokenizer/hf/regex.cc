// Backtracking regex for pre-tokenizer patterns: a recursive-descent parser to a small tree,
// compiled to a Pike-style program (char / set / split / jump / lookahead / match) that a
// backtracking machine runs from each start position (see regex.h for the syntax).
#include "common/engine/tokenizer/hf/regex.h"

#include <memory>
#include <optional>

#include "absl/strings/str_cat.h"

namespace splitspec::engine::hf {
namespace {

constexpr int kUnbounded = -1;

struct Node {
  enum Kind { kEmpty, kChar, kSet, kConcat, kAlt, kRepeat, kLookahead, kNegLookahead } kind;
  char32_t c = 0;
  bool icase = false;
  int set = -1;
  int min = 0, max = 0;
  bool greedy = true;
  std::vector<std::unique_ptr<Node>> children;
};

std::unique_ptr<Node> MakeNode(Node::Kind kind) {
  auto node = std::make_unique<Node>();
  node->kind = kind;
  return node;
}

// Whether `node` can match the empty string (a repeated nullable body would loop forever).
bool Nullable(const Node& node) {
  switch (node.kind) {
    case Node::kEmpty:
    case Node::kLookahead:
    case Node::kNegLookahead: return true;
    case Node::kChar:
    case Node::kSet: return false;
    case Node::kConcat:
      for (const auto& child : node.children) {
        if (!Nullable(*child)) return false;
      }
      return true;
    case Node::kAlt:
      for (const auto& child : node.children) {
        if (Nullable(*child)) return true;
      }
      return false;
    case Node::kRepeat: return node.min == 0 || Nullable(*node.children[0]);
  }
  return true;
}

class Parser {
 public:
  Parser(std::vector<CodePoint> pattern, std::vector<Regex::CharSet>* sets)
      : p_(std::move(pattern)), sets_(sets) {}

  absl::StatusOr<std::unique_ptr<Node>> Parse() {
    auto node = ParseAlternation(false);
    if (!node.ok()) return node;
    if (pos_ != p_.size()) return Error("unbalanced ')'");
    return node;
  }

 private:
  bool AtEnd() const { return pos_ >= p_.size(); }
  char32_t Peek(size_t ahead = 0) const { return pos_ + ahead < p_.size() ? p_[pos_ + ahead].value : 0; }
  absl::Status Error(const std::string& what) const {
    return absl::InvalidArgumentError(absl::StrCat("regex: ", what, " at position ", pos_));
  }

  absl::StatusOr<std::unique_ptr<Node>> ParseAlternation(bool icase) {
    auto alt = MakeNode(Node::kAlt);
    while (true) {
      auto branch = ParseConcat(icase);
      if (!branch.ok()) return branch.status();
      alt->children.push_back(*std::move(branch));
      if (AtEnd() || Peek() != '|') break;
      ++pos_;
    }
    if (alt->children.size() == 1) return std::move(alt->children[0]);
    return alt;
  }

  absl::StatusOr<std::unique_ptr<Node>> ParseConcat(bool icase) {
    auto concat = MakeNode(Node::kConcat);
    while (!AtEnd() && Peek() != '|' && Peek() != ')') {
      auto atom = ParseAtom(icase);
      if (!atom.ok()) return atom.status();
      auto repeated = ParseQuantifier(*std::move(atom));
      if (!repeated.ok()) return repeated.status();
      concat->children.push_back(*std::move(repeated));
    }
    if (concat->children.empty()) return MakeNode(Node::kEmpty);
    if (concat->children.size() == 1) return std::move(concat->children[0]);
    return concat;
  }

  absl::StatusOr<int> ParseNumber() {
    if (AtEnd() || Peek() < '0' || Peek() > '9') return Error("expected a number in {}");
    int value = 0;
    while (!AtEnd() && Peek() >= '0' && Peek() <= '9') {
      value = value * 10 + static_cast<int>(Peek() - '0');
      if (value > 1000) return Error("repetition count over 1000");
      ++pos_;
    }
    return value;
  }

  absl::StatusOr<std::unique_ptr<Node>> ParseQuantifier(std::unique_ptr<Node> atom) {
    if (AtEnd()) return atom;
    int min = 0, max = 0;
    const char32_t q = Peek();
    if (q == '*') {
      min = 0, max = kUnbounded, ++pos_;
    } else if (q == '+') {
      min = 1, max = kUnbounded, ++pos_;
    } else if (q == '?') {
      min = 0, max = 1, ++pos_;
    } else if (q == '{') {
      ++pos_;
      auto lo = ParseNumber();
      if (!lo.ok()) return lo.status();
      min = max = *lo;
      if (Peek() == ',') {
        ++pos_;
        max = kUnbounded;
        if (Peek() != '}') {
          auto hi = ParseNumber();
          if (!hi.ok()) return hi.status();
          max = *hi;
        }
      }
      if (Peek() != '}') return Error("expected '}'");
      ++pos_;
      if (max != kUnbounded && max < min) return Error("{n,m} with m < n");
    } else {
      return atom;
    }
    bool greedy = true;
    if (Peek() == '?') {
      greedy = false;
      ++pos_;
    } else if (Peek() == '+') {
      return Error("possessive quantifiers are not supported");
    }
    if (max == kUnbounded && Nullable(*atom)) return Error("unbounded repetition of a pattern that can be empty");
    auto node = MakeNode(Node::kRepeat);
    node->min = min;
    node->max = max;
    node->greedy = greedy;
    node->children.push_back(std::move(atom));
    return node;
  }

  absl::StatusOr<std::unique_ptr<Node>> ParseGroup(bool icase) {
    ++pos_;  // '('
    Node::Kind look = Node::kEmpty;
    if (Peek() == '?') {
      const char32_t kind = Peek(1);
      if (kind == ':') {
        pos_ += 2;
      } else if (kind == 'i' && Peek(2) == ':') {
        pos_ += 3;
        icase = true;
      } else if (kind == '=' || kind == '!') {
        pos_ += 2;
        look = kind == '=' ? Node::kLookahead : Node::kNegLookahead;
      } else {
        return Error("this group kind (lookbehind, named group or inline flags) is not supported");
      }
    }
    auto inner = ParseAlternation(icase);
    if (!inner.ok()) return inner.status();
    if (AtEnd() || Peek() != ')') return Error("missing ')'");
    ++pos_;
    if (look == Node::kEmpty) return inner;
    auto node = MakeNode(look);
    node->children.push_back(*std::move(inner));
    return node;
  }

  // Reads hex digits: exactly `count` of them, or up to '}' when count is 0.
  absl::StatusOr<char32_t> ParseHex(int count) {
    char32_t value = 0;
    int digits = 0;
    while (!AtEnd() && (count == 0 ? Peek() != '}' : digits < count)) {
      const char32_t h = Peek();
      int v = -1;
      if (h >= '0' && h <= '9') v = static_cast<int>(h - '0');
      if (h >= 'a' && h <= 'f') v = static_cast<int>(h - 'a' + 10);
      if (h >= 'A' && h <= 'F') v = static_cast<int>(h - 'A' + 10);
      if (v < 0) return Error("bad hex digit");
      value = value * 16 + static_cast<char32_t>(v);
      ++digits;
      ++pos_;
      if (value > 0x10FFFF) return Error("code point past U+10FFFF");
    }
    if (digits == 0 || (count != 0 && digits != count)) return Error("bad hex escape");
    return value;
  }

  // One escape after '\': either a single character or class items (\p{L}, \s, ...).
  absl::Status ParseEscape(std::optional<char32_t>* single, std::vector<Regex::SetItem>* items,
                           bool* negate_items) {
    ++pos_;  // '\'
    if (AtEnd()) return Error("dangling '\\'");
    const char32_t e = Peek();
    ++pos_;
    *negate_items = false;
    using Item = Regex::SetItem;
    switch (e) {
      case 'r': *single = U'\r'; return absl::OkStatus();
      case 'n': *single = U'\n'; return absl::OkStatus();
      case 't': *single = U'\t'; return absl::OkStatus();
      case 'f': *single = U'\f'; return absl::OkStatus();
      case 'v': *single = U'\v'; return absl::OkStatus();
      case '0': *single = U'\0'; return absl::OkStatus();
      case 's': items->push_back(Item::Of(Item::kSpace)); return absl::OkStatus();
      case 'S': items->push_back(Item::Of(Item::kNotSpace)); return absl::OkStatus();
      case 'd': items->push_back(Item::Of(Item::kCategory, GeneralCategoryMaskByName("Nd"))); return absl::OkStatus();
      case 'D': items->push_back(Item::Of(Item::kNotCategory, GeneralCategoryMaskByName("Nd"))); return absl::OkStatus();
      case 'w':
      case 'W': {
        // Word characters: letters, marks, decimal digits and connector punctuation.
        const uint32_t mask = GeneralCategoryMaskByName("L") | GeneralCategoryMaskByName("M") |
                              GeneralCategoryMaskByName("Nd") | GeneralCategoryMaskByName("Pc");
        items->push_back(Item::Of(Item::kCategory, mask));
        *negate_items = e == 'W';
        return absl::OkStatus();
      }
      case 'p':
      case 'P': {
        std::string name;
        if (Peek() == '{') {
          ++pos_;
          while (!AtEnd() && Peek() != '}') AppendUtf8(p_[pos_++].value, &name);
          if (AtEnd()) return Error("missing '}' after \\p{");
          ++pos_;
        } else if (!AtEnd()) {
          AppendUtf8(p_[pos_++].value, &name);
        }
        bool negated = e == 'P';
        if (!name.empty() && name[0] == '^') {
          negated = !negated;
          name.erase(0, 1);
        }
        const uint32_t mask = GeneralCategoryMaskByName(name);
        if (mask == 0) return Error(absl::StrCat("unknown Unicode category \\p{", name, "}"));
        items->push_back(Item::Of(negated ? Item::kNotCategory : Item::kCategory, mask));
        return absl::OkStatus();
      }
      case 'x': {
        if (Peek() == '{') {
          ++pos_;
          auto v = ParseHex(0);
          if (!v.ok()) return v.status();
          if (Peek() != '}') return Error("missing '}' after \\x{");
          ++pos_;
          *single = *v;
          return absl::OkStatus();
        }
        auto v = ParseHex(2);
        if (!v.ok()) return v.status();
        *single = *v;
        return absl::OkStatus();
      }
      case 'u': {
        auto v = ParseHex(4);
        if (!v.ok()) return v.status();
        *single = *v;
        return absl::OkStatus();
      }
      default:
        if ((e >= 'a' && e <= 'z') || (e >= 'A' && e <= 'Z') || (e >= '1' && e <= '9')) {
          return Error(absl::StrCat("unsupported escape \\", std::string(1, static_cast<char>(e))));
        }
        *single = e;
        return absl::OkStatus();
    }
  }

  absl::StatusOr<std::unique_ptr<Node>> ParseClass(bool icase) {
    ++pos_;  // '['
    Regex::CharSet set;
    set.icase = icase;
    if (Peek() == '^') {
      set.negated = true;
      ++pos_;
    }
    bool first = true;
    while (!AtEnd() && (Peek() != ']' || first)) {
      first = false;
      std::optional<char32_t> lo;
      if (Peek() == '\\') {
        std::vector<Regex::SetItem> items;
        bool negate = false;
        if (absl::Status s = ParseEscape(&lo, &items, &negate); !s.ok()) return s;
        if (negate) return Error("\\W inside a class is not supported");
        set.items.insert(set.items.end(), items.begin(), items.end());
        if (!lo.has_value()) continue;
      } else if (Peek() == '[') {
        return Error("nested classes are not supported");
      } else {
        lo = p_[pos_++].value;
      }
      char32_t hi = *lo;
      if (Peek() == '-' && Peek(1) != ']' && pos_ + 1 < p_.size()) {
        ++pos_;
        std::optional<char32_t> end;
        if (Peek() == '\\') {
          std::vector<Regex::SetItem> items;
          bool negate = false;
          if (absl::Status s = ParseEscape(&end, &items, &negate); !s.ok()) return s;
          if (!end.has_value()) return Error("a class range must end in a character");
        } else {
          end = p_[pos_++].value;
        }
        hi = *end;
        if (hi < *lo) return Error("class range out of order");
      }
      set.items.push_back(Regex::SetItem::Range(*lo, hi));
    }
    if (AtEnd()) return Error("missing ']'");
    ++pos_;
    return AddSet(std::move(set));
  }

  std::unique_ptr<Node> AddSet(Regex::CharSet set) {
    auto node = MakeNode(Node::kSet);
    node->set = static_cast<int>(sets_->size());
    sets_->push_back(std::move(set));
    return node;
  }

  absl::StatusOr<std::unique_ptr<Node>> ParseAtom(bool icase) {
    const char32_t c = Peek();
    switch (c) {
      case '(': return ParseGroup(icase);
      case '[': return ParseClass(icase);
      case '.': {
        ++pos_;
        Regex::CharSet set;
        set.negated = true;
        set.items.push_back(Regex::SetItem::Range(U'\n', U'\n'));
        return AddSet(std::move(set));
      }
      case '^':
      case '$': return Error("anchors are not supported");
      case '*':
      case '+':
      case '?':
      case '{': return Error("quantifier without an operand");
      case '\\': {
        std::optional<char32_t> single;
        Regex::CharSet set;
        set.icase = icase;
        if (absl::Status s = ParseEscape(&single, &set.items, &set.negated); !s.ok()) return s;
        if (!single.has_value()) return AddSet(std::move(set));
        auto node = MakeNode(Node::kChar);
        node->c = *single;
        node->icase = icase;
        return node;
      }
      default: {
        ++pos_;
        auto node = MakeNode(Node::kChar);
        node->c = c;
        node->icase = icase;
        return node;
      }
    }
  }

  std::vector<CodePoint> p_;
  size_t pos_ = 0;
  std::vector<Regex::CharSet>* sets_;
};

class Emitter {
 public:
  explicit Emitter(std::vector<Regex::Inst>* program) : program_(program) {}

  void Emit(const Node& node) {
    using Op = Regex::Op;
    switch (node.kind) {
      case Node::kEmpty: return;
      case Node::kChar: program_->push_back(Regex::Inst::Make(Op::kChar, node.icase, node.c)); return;
      case Node::kSet: program_->push_back(Regex::Inst::Make(Op::kSet, false, 0, node.set)); return;
      case Node::kConcat:
        for (const auto& child : node.children) Emit(*child);
        return;
      case Node::kAlt: EmitAlt(node, 0); return;
      case Node::kRepeat: EmitRepeat(node); return;
      case Node::kLookahead:
      case Node::kNegLookahead: {
        const size_t look = Add(Regex::Inst::Make(node.kind == Node::kLookahead ? Op::kLookahead : Op::kNegLookahead));
        Emit(*node.children[0]);
        Add(Regex::Inst::Make(Op::kMatch));
        (*program_)[look].y = Here();
        return;
      }
    }
  }

 private:
  int32_t Here() const { return static_cast<int32_t>(program_->size()); }
  size_t Add(Regex::Inst inst) {
    program_->push_back(inst);
    return program_->size() - 1;
  }

  void EmitAlt(const Node& node, size_t i) {
    using Op = Regex::Op;
    if (i + 1 == node.children.size()) {
      Emit(*node.children[i]);
      return;
    }
    const size_t split = Add(Regex::Inst::Make(Op::kSplit));
    (*program_)[split].x = Here();
    Emit(*node.children[i]);
    const size_t jump = Add(Regex::Inst::Make(Op::kJmp));
    (*program_)[split].y = Here();
    EmitAlt(node, i + 1);
    (*program_)[jump].x = Here();
  }

  // Split whose preferred branch is the body when greedy, the exit when lazy.
  size_t AddChoice() { return Add(Regex::Inst::Make(Regex::Op::kSplit)); }
  void SetChoice(size_t split, int32_t body, int32_t exit, bool greedy) {
    (*program_)[split].x = greedy ? body : exit;
    (*program_)[split].y = greedy ? exit : body;
  }

  void EmitRepeat(const Node& node) {
    const Node& body = *node.children[0];
    for (int i = 0; i < node.min; ++i) Emit(body);
    if (node.max == kUnbounded) {
      const size_t split = AddChoice();
      const int32_t start = Here();
      Emit(body);
      Add(Regex::Inst::Make(Regex::Op::kJmp, false, 0, static_cast<int32_t>(split)));
      SetChoice(split, start, Here(), node.greedy);
      return;
    }
    std::vector<size_t> splits;
    for (int i = node.min; i < node.max; ++i) {
      splits.push_back(AddChoice());
      (*program_)[splits.back()].x = Here();  // body start, fixed up below
      Emit(body);
    }
    for (size_t split : splits) {
      SetChoice(split, static_cast<int32_t>(split + 1), Here(), node.greedy);
    }
  }

  std::vector<Regex::Inst>* program_;
};

}  // namespace

absl::StatusOr<Regex> Regex::Compile(std::string_view pattern) {
  Regex regex;
  Parser parser(DecodeUtf8(pattern), &regex.sets_);
  auto tree = parser.Parse();
  if (!tree.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(tree.status().message(), " in pattern \"", std::string(pattern), "\""));
  }
  Emitter emitter(&regex.program_);
  emitter.Emit(**tree);
  regex.program_.push_back(Inst::Make(Op::kMatch));
  return regex;
}

bool Regex::InSet(const CharSet& set, const Char& ch) const {
  bool hit = false;
  for (const SetItem& item : set.items) {
    switch (item.kind) {
      case SetItem::kRange:
        hit = (ch.c >= item.lo && ch.c <= item.hi) ||
              (set.icase && FoldCase(ch.c) >= FoldCase(item.lo) && FoldCase(ch.c) <= FoldCase(item.hi));
        break;
      case SetItem::kCategory: hit = (ch.category_mask & item.mask) != 0; break;
      case SetItem::kNotCategory: hit = (ch.category_mask & item.mask) == 0; break;
      case SetItem::kSpace: hit = ch.space; break;
      case SetItem::kNotSpace: hit = !ch.space; break;
    }
    if (hit) break;
  }
  return hit != set.negated;
}

bool Regex::MatchAt(int32_t pc, uint32_t pos, const std::vector<Char>& text, Stack* stack,
                    uint32_t* end) const {
  const size_t base = stack->size();
  stack->emplace_back(pc, pos);
  while (stack->size() > base) {
    std::tie(pc, pos) = stack->back();
    stack->pop_back();
    bool alive = true;
    while (alive) {
      const Inst& inst = program_[pc];
      switch (inst.op) {
        case Op::kChar:
          alive = pos < text.size() &&
                  (text[pos].c == inst.c || (inst.icase && FoldCase(text[pos].c) == FoldCase(inst.c)));
          ++pc, ++pos;
          break;
        case Op::kSet:
          alive = pos < text.size() && InSet(sets_[inst.x], text[pos]);
          ++pc, ++pos;
          break;
        case Op::kSplit:
          stack->emplace_back(inst.y, pos);
          pc = inst.x;
          break;
        case Op::kJmp: pc = inst.x; break;
        case Op::kLookahead:
        case Op::kNegLookahead: {
          uint32_t ignored = 0;
          const bool matched = MatchAt(pc + 1, pos, text, stack, &ignored);
          alive = matched == (inst.op == Op::kLookahead);
          pc = inst.y;
          break;
        }
        case Op::kMatch:
          *end = pos;
          stack->resize(base);
          return true;
      }
    }
  }
  return false;
}

std::vector<std::pair<size_t, size_t>> Regex::FindAll(std::string_view text) const {
  const std::vector<CodePoint> points = DecodeUtf8(text);
  std::vector<Char> chars;
  chars.reserve(points.size());
  for (const CodePoint& p : points) chars.push_back({p.value, GeneralCategoryMaskOf(p.value), IsWhiteSpace(p.value)});
  auto byte_at = [&](uint32_t i) { return i < points.size() ? points[i].byte_offset : text.size(); };
  std::vector<std::pair<size_t, size_t>> matches;
  Stack stack;
  uint32_t pos = 0;
  while (pos < chars.size()) {
    uint32_t end = 0;
    if (MatchAt(0, pos, chars, &stack, &end) && end > pos) {
      matches.emplace_back(byte_at(pos), byte_at(end));
      pos = end;
    } else {
      ++pos;
    }
  }
  return matches;
}

}  // namespace splitspec::engine::hf

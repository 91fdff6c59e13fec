// Tree-walking evaluation of the Jinja subset (see jinja_renderer.h). Values are JSON plus an
// "undefined" flag; for-loops open a scope (so a {% set %} inside stays inside, as in Jinja)
// and namespace() objects are the one thing a loop body can change outside itself.
#include "common/engine/chat_template/jinja_renderer.h"

#include <algorithm>
#include <cmath>
#include <map>
#include <stdexcept>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace splitspec::chat_template {
namespace {

struct RenderError : std::runtime_error {
  using std::runtime_error::runtime_error;
};

struct Value {
  bool defined = true;
  Json json;
  static Value Undefined() { return Value{false, nullptr}; }
  static Value Of(Json j) { return Value{true, std::move(j)}; }
};

bool Truthy(const Value& v) {
  if (!v.defined) return false;
  const Json& j = v.json;
  if (j.is_null()) return false;
  if (j.is_boolean()) return j.get<bool>();
  if (j.is_number_integer()) return j.get<int64_t>() != 0;
  if (j.is_number_float()) return j.get<double>() != 0.0;
  if (j.is_string()) return !j.get_ref<const std::string&>().empty();
  return !j.empty();
}

std::string TypeName(const Value& v) {
  if (!v.defined) return "undefined";
  return v.json.type_name();
}

// How {{ value }} prints (Python's str() for the types templates use).
std::string ToText(const Value& v) {
  if (!v.defined) return "";
  const Json& j = v.json;
  if (j.is_string()) return j.get<std::string>();
  if (j.is_null()) return "None";
  if (j.is_boolean()) return j.get<bool>() ? "True" : "False";
  if (j.is_number_integer()) return std::to_string(j.get<int64_t>());
  if (j.is_number_float()) {
    const double d = j.get<double>();
    if (std::floor(d) == d && std::fabs(d) < 1e16) return absl::StrFormat("%.1f", d);
    return absl::StrFormat("%.17g", d);
  }
  return j.dump();
}

std::string StripChars(const std::string& s, const std::string& chars, bool left, bool right) {
  size_t b = 0, e = s.size();
  auto strip = [&](char c) { return chars.empty() ? std::isspace(static_cast<unsigned char>(c)) != 0 : chars.find(c) != std::string::npos; };
  while (left && b < e && strip(s[b])) ++b;
  while (right && e > b && strip(s[e - 1])) --e;
  return s.substr(b, e - b);
}

int64_t NormalizeIndex(int64_t index, size_t size) { return index < 0 ? index + static_cast<int64_t>(size) : index; }

class Renderer {
 public:
  Renderer(const Json& variables, size_t max_output) : max_output_(max_output) {
    scopes_.emplace_back();
    for (const auto& [k, v] : variables.items()) scopes_.back()[k] = Value::Of(v);
  }

  void Render(const NodeList& nodes) {
    for (const auto& node : nodes) Run(*node);
  }
  std::string& out() { return out_; }

 private:
  void Emit(const std::string& text) {
    out_ += text;
    if (out_.size() > max_output_) throw RenderError("rendered prompt exceeds the size limit");
  }

  Value* Find(const std::string& name) {
    for (auto it = scopes_.rbegin(); it != scopes_.rend(); ++it) {
      auto found = it->find(name);
      if (found != it->end()) return &found->second;
    }
    return nullptr;
  }

  void Run(const Node& node) {
    switch (node.kind) {
      case Node::kText: Emit(node.text); return;
      case Node::kOutput: Emit(ToText(Eval(*node.expr))); return;
      case Node::kIf:
        for (const auto& [condition, body] : node.branches) {
          if (Truthy(Eval(*condition))) {
            Render(body);
            return;
          }
        }
        Render(node.else_body);
        return;
      case Node::kSet: {
        Value value = Eval(*node.expr);
        if (node.targets.size() == 1) {
          scopes_.back()[node.targets[0]] = std::move(value);
          return;
        }
        Value* ns = Find(node.targets[0]);
        if (ns == nullptr || !ns->defined || !ns->json.is_object()) {
          throw RenderError(absl::StrCat("cannot set an attribute of '", node.targets[0], "'"));
        }
        ns->json[node.targets[1]] = value.json;
        return;
      }
      case Node::kFor: RunFor(node); return;
    }
  }

  void RunFor(const Node& node) {
    const Value iterable = Eval(*node.expr);
    std::vector<Json> items;
    if (iterable.defined && iterable.json.is_array()) {
      items.assign(iterable.json.begin(), iterable.json.end());
    } else if (iterable.defined && iterable.json.is_object()) {
      for (const auto& [k, v] : iterable.json.items()) items.push_back(k);
    } else if (iterable.defined && iterable.json.is_string()) {
      for (char c : iterable.json.get<std::string>()) items.push_back(std::string(1, c));
    } else if (iterable.defined && !iterable.json.is_null()) {
      throw RenderError(absl::StrCat("cannot loop over ", TypeName(iterable)));
    }
    if (node.filter != nullptr) {
      std::vector<Json> kept;
      for (const Json& item : items) {
        scopes_.emplace_back();
        Bind(node, item);
        if (Truthy(Eval(*node.filter))) kept.push_back(item);
        scopes_.pop_back();
      }
      items = std::move(kept);
    }
    if (items.empty()) {
      Render(node.else_body);
      return;
    }
    const int64_t n = static_cast<int64_t>(items.size());
    for (int64_t i = 0; i < n; ++i) {
      scopes_.emplace_back();
      Bind(node, items[i]);
      Json loop = {{"index0", i}, {"index", i + 1}, {"first", i == 0}, {"last", i == n - 1}, {"length", n},
                   {"revindex", n - i}, {"revindex0", n - i - 1}};
      if (i > 0) loop["previtem"] = items[i - 1];
      if (i + 1 < n) loop["nextitem"] = items[i + 1];
      scopes_.back()["loop"] = Value::Of(std::move(loop));
      Render(node.body);
      scopes_.pop_back();
    }
  }

  void Bind(const Node& node, const Json& item) {
    if (node.targets.size() == 1) {
      scopes_.back()[node.targets[0]] = Value::Of(item);
      return;
    }
    if (!item.is_array() || item.size() != node.targets.size()) throw RenderError("cannot unpack loop item");
    for (size_t k = 0; k < node.targets.size(); ++k) scopes_.back()[node.targets[k]] = Value::Of(item[k]);
  }

  Value Eval(const Expr& e) {
    switch (e.kind) {
      case Expr::kLiteral: return Value::Of(e.value);
      case Expr::kName: {
        Value* v = Find(e.name);
        return v == nullptr ? Value::Undefined() : *v;
      }
      case Expr::kList: {
        Json list = Json::array();
        for (const auto& a : e.args) list.push_back(Defined(Eval(*a), "list item").json);
        return Value::Of(std::move(list));
      }
      case Expr::kDict: {
        Json dict = Json::object();
        for (const auto& [k, a] : e.kwargs) dict[k] = Defined(Eval(*a), "dict value").json;
        return Value::Of(std::move(dict));
      }
      case Expr::kAttr: return Member(Eval(*e.args[0]), Json(e.name));
      case Expr::kIndex: return Member(Eval(*e.args[0]), Eval(*e.args[1]).json);
      case Expr::kSlice: return Slice(e);
      case Expr::kCall: return Call(e);
      case Expr::kFilter: return Filter(e);
      case Expr::kTest: {
        const bool result = Test(e);
        return Value::Of(e.negate ? !result : result);
      }
      case Expr::kUnary: {
        const Value v = Eval(*e.args[0]);
        if (e.name == "not") return Value::Of(!Truthy(v));
        if (!v.defined || !v.json.is_number()) throw RenderError(absl::StrCat("unary ", e.name, " on ", TypeName(v)));
        if (e.name == "+") return v;
        return v.json.is_number_integer() ? Value::Of(-v.json.get<int64_t>()) : Value::Of(-v.json.get<double>());
      }
      case Expr::kBinary: return Binary(e);
      case Expr::kConditional:
        return Truthy(Eval(*e.args[0])) ? Eval(*e.args[1]) : Eval(*e.args[2]);
    }
    return Value::Undefined();
  }

  static Value Defined(Value v, const char* what) {
    if (!v.defined) throw RenderError(absl::StrCat("undefined value used as ", what));
    return v;
  }

  Value Member(const Value& object, const Json& key) {
    if (!object.defined) throw RenderError(absl::StrCat("cannot read '", ToText(Value::Of(key)), "' of an undefined value"));
    const Json& j = object.json;
    if (j.is_object() && key.is_string()) {
      auto it = j.find(key.get<std::string>());
      return it == j.end() ? Value::Undefined() : Value::Of(*it);
    }
    if ((j.is_array() || j.is_string()) && key.is_number_integer()) {
      const size_t size = j.is_array() ? j.size() : j.get_ref<const std::string&>().size();
      const int64_t index = NormalizeIndex(key.get<int64_t>(), size);
      if (index < 0 || index >= static_cast<int64_t>(size)) return Value::Undefined();
      if (j.is_array()) return Value::Of(j[static_cast<size_t>(index)]);
      return Value::Of(std::string(1, j.get_ref<const std::string&>()[static_cast<size_t>(index)]));
    }
    return Value::Undefined();  // e.g. a method name: resolved by Call
  }

  Value Slice(const Expr& e) {
    const Value object = Defined(Eval(*e.args[0]), "sliced value");
    const Json start = Eval(*e.args[1]).json, stop = Eval(*e.args[2]).json, step_json = Eval(*e.args[3]).json;
    const int64_t step = step_json.is_null() ? 1 : step_json.get<int64_t>();
    if (step == 0) throw RenderError("slice step cannot be zero");
    const bool is_list = object.json.is_array();
    if (!is_list && !object.json.is_string()) throw RenderError(absl::StrCat("cannot slice ", TypeName(object)));
    const int64_t size = static_cast<int64_t>(is_list ? object.json.size() : object.json.get_ref<const std::string&>().size());
    auto clamp = [&](const Json& bound, int64_t fallback) {
      if (bound.is_null()) return fallback;
      int64_t v = bound.get<int64_t>();
      if (v < 0) v += size;
      return step > 0 ? std::clamp<int64_t>(v, 0, size) : std::clamp<int64_t>(v, -1, size - 1);
    };
    const int64_t from = clamp(start, step > 0 ? 0 : size - 1), to = clamp(stop, step > 0 ? size : -1);
    Json list = Json::array();
    std::string text;
    for (int64_t i = from; step > 0 ? i < to : i > to; i += step) {
      if (is_list) list.push_back(object.json[static_cast<size_t>(i)]);
      else text.push_back(object.json.get_ref<const std::string&>()[static_cast<size_t>(i)]);
    }
    return is_list ? Value::Of(std::move(list)) : Value::Of(std::move(text));
  }

  std::vector<Value> Args(const Expr& e, size_t first) {
    std::vector<Value> args;
    for (size_t i = first; i < e.args.size(); ++i) args.push_back(Eval(*e.args[i]));
    return args;
  }

  static std::string StringArg(const std::vector<Value>& args, size_t i, const std::string& fallback) {
    if (i >= args.size() || !args[i].defined || args[i].json.is_null()) return fallback;
    if (!args[i].json.is_string()) throw RenderError("expected a string argument");
    return args[i].json.get<std::string>();
  }

  Value Call(const Expr& e) {
    const Expr& callee = *e.args[0];
    if (callee.kind == Expr::kName) {
      if (callee.name == "raise_exception") {
        throw RenderError(absl::StrCat("template raised: ", ToText(Eval(*e.args.at(1)))));
      }
      if (callee.name == "namespace") {
        Json ns = Json::object();
        for (const auto& [k, a] : e.kwargs) ns[k] = Eval(*a).json;
        return Value::Of(std::move(ns));
      }
      if (callee.name == "range") {
        const std::vector<Value> args = Args(e, 1);
        int64_t from = 0, to = 0;
        if (args.size() == 1) to = args[0].json.get<int64_t>();
        else if (args.size() == 2) from = args[0].json.get<int64_t>(), to = args[1].json.get<int64_t>();
        else throw RenderError("range() takes 1 or 2 arguments here");
        if (to - from > 100000) throw RenderError("range() too long");
        Json list = Json::array();
        for (int64_t i = from; i < to; ++i) list.push_back(i);
        return Value::Of(std::move(list));
      }
      throw RenderError(absl::StrCat("unknown function '", callee.name, "'"));
    }
    if (callee.kind != Expr::kAttr) throw RenderError("only functions and methods can be called");
    const Value object = Defined(Eval(*callee.args[0]), "method receiver");
    const std::vector<Value> args = Args(e, 1);
    const std::string& method = callee.name;
    if (object.json.is_string()) {
      const std::string& s = object.json.get_ref<const std::string&>();
      if (method == "strip") return Value::Of(StripChars(s, StringArg(args, 0, ""), true, true));
      if (method == "lstrip") return Value::Of(StripChars(s, StringArg(args, 0, ""), true, false));
      if (method == "rstrip") return Value::Of(StripChars(s, StringArg(args, 0, ""), false, true));
      if (method == "startswith") return Value::Of(s.rfind(StringArg(args, 0, ""), 0) == 0);
      if (method == "endswith") {
        const std::string suffix = StringArg(args, 0, "");
        return Value::Of(s.size() >= suffix.size() && s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0);
      }
      if (method == "upper" || method == "lower") {
        std::string t = s;
        for (char& c : t) c = static_cast<char>(method == "upper" ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c)));
        return Value::Of(t);
      }
      if (method == "split") {
        const std::string sep = StringArg(args, 0, "");
        Json parts = Json::array();
        if (sep.empty()) {
          for (absl::string_view p : absl::StrSplit(s, absl::ByAnyChar(" \t\n\r\f\v"), absl::SkipEmpty())) parts.push_back(std::string(p));
        } else {
          for (absl::string_view p : absl::StrSplit(s, sep)) parts.push_back(std::string(p));
        }
        return Value::Of(std::move(parts));
      }
      if (method == "replace") {
        const std::string from = StringArg(args, 0, ""), to = StringArg(args, 1, "");
        if (from.empty()) throw RenderError("replace() with an empty pattern");
        std::string t;
        size_t done = 0;
        for (size_t at = s.find(from); at != std::string::npos; at = s.find(from, at + from.size())) {
          t.append(s, done, at - done).append(to);
          done = at + from.size();
        }
        return Value::Of(t.append(s, done));
      }
    }
    if (object.json.is_object()) {
      if (method == "items") {
        Json items = Json::array();
        for (const auto& [k, v] : object.json.items()) items.push_back(Json::array({k, v}));
        return Value::Of(std::move(items));
      }
      if (method == "keys" || method == "values") {
        Json list = Json::array();
        for (const auto& [k, v] : object.json.items()) list.push_back(method == "keys" ? Json(k) : v);
        return Value::Of(std::move(list));
      }
      if (method == "get") {
        const Value found = Member(object, args.empty() ? Json() : args[0].json);
        return found.defined ? found : (args.size() > 1 ? args[1] : Value::Of(nullptr));
      }
    }
    throw RenderError(absl::StrCat("unsupported method '", method, "' on ", TypeName(object)));
  }

  Value Filter(const Expr& e) {
    const Value v = Eval(*e.args[0]);
    const std::vector<Value> args = Args(e, 1);
    const std::string& f = e.name;
    if (f == "default" || f == "d") {
      const bool use_default = !v.defined || (args.size() > 1 && Truthy(args[1]) && !Truthy(v));
      return use_default ? (args.empty() ? Value::Of("") : args[0]) : v;
    }
    if (f == "safe") return v;
    const Value d = Defined(v, "filter input");
    if (f == "trim") return Value::Of(StripChars(ToText(d), StringArg(args, 0, ""), true, true));
    if (f == "length" || f == "count") {
      if (d.json.is_string()) return Value::Of(static_cast<int64_t>(d.json.get_ref<const std::string&>().size()));
      if (d.json.is_array() || d.json.is_object()) return Value::Of(static_cast<int64_t>(d.json.size()));
      throw RenderError(absl::StrCat("length of ", TypeName(d)));
    }
    if (f == "string") return Value::Of(ToText(d));
    if (f == "tojson") return Value::Of(d.json.dump());
    if (f == "upper" || f == "lower") {
      std::string t = ToText(d);
      for (char& c : t) c = static_cast<char>(f == "upper" ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c)));
      return Value::Of(t);
    }
    if (f == "capitalize") {
      std::string t = ToText(d);
      for (size_t i = 0; i < t.size(); ++i) t[i] = static_cast<char>(i == 0 ? std::toupper(static_cast<unsigned char>(t[i])) : std::tolower(static_cast<unsigned char>(t[i])));
      return Value::Of(t);
    }
    if (f == "first" || f == "last") {
      if (!d.json.is_array()) throw RenderError(absl::StrCat(f, " of ", TypeName(d)));
      if (d.json.empty()) return Value::Undefined();
      return Value::Of(f == "first" ? d.json.front() : d.json.back());
    }
    if (f == "join") {
      if (!d.json.is_array()) throw RenderError(absl::StrCat("join of ", TypeName(d)));
      std::string t;
      const std::string sep = StringArg(args, 0, "");
      for (size_t i = 0; i < d.json.size(); ++i) t += (i ? sep : "") + ToText(Value::Of(d.json[i]));
      return Value::Of(t);
    }
    if (f == "list") {
      if (d.json.is_array()) return d;
      Json list = Json::array();
      if (d.json.is_string()) for (char c : d.json.get<std::string>()) list.push_back(std::string(1, c));
      else throw RenderError(absl::StrCat("list of ", TypeName(d)));
      return Value::Of(std::move(list));
    }
    if (f == "int") {
      if (d.json.is_number()) return Value::Of(static_cast<int64_t>(d.json.get<double>()));
      return Value::Of(0);
    }
    throw RenderError(absl::StrCat("unsupported filter '", f, "'"));
  }

  bool Test(const Expr& e) {
    const Value v = Eval(*e.args[0]);
    const std::string& t = e.name;
    const Json& j = v.json;
    if (t == "defined") return v.defined;
    if (t == "undefined") return !v.defined;
    if (t == "none") return v.defined && j.is_null();
    if (t == "string") return v.defined && j.is_string();
    if (t == "number") return v.defined && j.is_number();
    if (t == "integer") return v.defined && j.is_number_integer();
    if (t == "float") return v.defined && j.is_number_float();
    if (t == "boolean") return v.defined && j.is_boolean();
    if (t == "true") return v.defined && j.is_boolean() && j.get<bool>();
    if (t == "false") return v.defined && j.is_boolean() && !j.get<bool>();
    if (t == "mapping") return v.defined && j.is_object();
    if (t == "iterable") return v.defined && (j.is_array() || j.is_object() || j.is_string());
    if (t == "sequence") return v.defined && (j.is_array() || j.is_string());
    if (t == "odd" || t == "even") {
      if (!v.defined || !j.is_number_integer()) throw RenderError(absl::StrCat("test '", t, "' on ", TypeName(v)));
      return (j.get<int64_t>() % 2 != 0) == (t == "odd");
    }
    throw RenderError(absl::StrCat("unsupported test '", t, "'"));
  }

  Value Binary(const Expr& e) {
    const std::string& op = e.name;
    if (op == "and") {
      Value left = Eval(*e.args[0]);
      return Truthy(left) ? Eval(*e.args[1]) : left;
    }
    if (op == "or") {
      Value left = Eval(*e.args[0]);
      return Truthy(left) ? left : Eval(*e.args[1]);
    }
    const Value a = Eval(*e.args[0]), b = Eval(*e.args[1]);
    if (op == "~") return Value::Of(ToText(a) + ToText(b));
    if (op == "==") return Value::Of(a.defined == b.defined && a.json == b.json);
    if (op == "!=") return Value::Of(!(a.defined == b.defined && a.json == b.json));
    if (op == "in" || op == "not in") {
      const Value hay = Defined(b, "right side of 'in'");
      bool found = false;
      if (hay.json.is_string()) {
        if (!a.defined || !a.json.is_string()) throw RenderError("'in' a string needs a string");
        found = hay.json.get_ref<const std::string&>().find(a.json.get<std::string>()) != std::string::npos;
      } else if (hay.json.is_array()) {
        found = std::find(hay.json.begin(), hay.json.end(), a.json) != hay.json.end();
      } else if (hay.json.is_object()) {
        found = a.json.is_string() && hay.json.contains(a.json.get<std::string>());
      } else {
        throw RenderError(absl::StrCat("'in' ", TypeName(hay)));
      }
      return Value::Of(op == "in" ? found : !found);
    }
    const Value x = Defined(a, "operand"), y = Defined(b, "operand");
    if (op == "+" && x.json.is_string() && y.json.is_string()) return Value::Of(x.json.get<std::string>() + y.json.get<std::string>());
    if (op == "+" && x.json.is_array() && y.json.is_array()) {
      Json list = x.json;
      for (const Json& item : y.json) list.push_back(item);
      return Value::Of(std::move(list));
    }
    if (x.json.is_string() && y.json.is_string()) {
      const std::string& l = x.json.get_ref<const std::string&>();
      const std::string& r = y.json.get_ref<const std::string&>();
      if (op == "<") return Value::Of(l < r);
      if (op == ">") return Value::Of(l > r);
      if (op == "<=") return Value::Of(l <= r);
      if (op == ">=") return Value::Of(l >= r);
    }
    if (!x.json.is_number() || !y.json.is_number()) {
      throw RenderError(absl::StrCat("'", op, "' between ", TypeName(x), " and ", TypeName(y)));
    }
    const bool ints = x.json.is_number_integer() && y.json.is_number_integer();
    const double l = x.json.get<double>(), r = y.json.get<double>();
    if (op == "<") return Value::Of(l < r);
    if (op == ">") return Value::Of(l > r);
    if (op == "<=") return Value::Of(l <= r);
    if (op == ">=") return Value::Of(l >= r);
    if (ints) {
      const int64_t li = x.json.get<int64_t>(), ri = y.json.get<int64_t>();
      if (op == "+") return Value::Of(li + ri);
      if (op == "-") return Value::Of(li - ri);
      if (op == "*") return Value::Of(li * ri);
      if ((op == "//" || op == "%") && ri == 0) throw RenderError("division by zero");
      if (op == "//") return Value::Of(static_cast<int64_t>(std::floor(static_cast<double>(li) / ri)));
      if (op == "%") return Value::Of(((li % ri) + ri) % ri);
    }
    if (op == "+") return Value::Of(l + r);
    if (op == "-") return Value::Of(l - r);
    if (op == "*") return Value::Of(l * r);
    if (r == 0) throw RenderError("division by zero");
    if (op == "/") return Value::Of(l / r);
    if (op == "//") return Value::Of(std::floor(l / r));
    if (op == "%") return Value::Of(std::fmod(l, r));
    throw RenderError(absl::StrCat("unsupported operator '", op, "'"));
  }

  std::vector<std::map<std::string, Value>> scopes_;
  std::string out_;
  size_t max_output_;
};

}  // namespace

absl::StatusOr<std::string> RenderTemplate(const NodeList& nodes, const Json& variables, size_t max_output_bytes) {
  if (!variables.is_object()) return absl::InvalidArgumentError("template variables must be an object");
  try {
    Renderer renderer(variables, max_output_bytes);
    renderer.Render(nodes);
    return std::move(renderer.out());
  } catch (const RenderError& e) {
    return absl::InvalidArgumentError(absl::StrCat("chat template: ", e.what()));
  } catch (const nlohmann::json::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("chat template: ", e.what()));
  }
}

}  // namespace splitspec::chat_template

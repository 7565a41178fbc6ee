#include "core/spec/parser.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <limits>
#include <optional>
#include <string>
#include <utility>

#include "core/spec/lexer.h"

namespace nautilus::spec {

namespace {

// A parsed subtree and its height (a leaf is 1). A null node means an error was reported.
template <class T>
struct Parsed {
  std::unique_ptr<T> node;
  int depth = 0;
  explicit operator bool() const { return node != nullptr; }
};

bool is_comparison(TokenKind kind) {
  return kind == TokenKind::Less || kind == TokenKind::LessEqual || kind == TokenKind::Greater ||
         kind == TokenKind::GreaterEqual || kind == TokenKind::EqualEqual ||
         kind == TokenKind::NotEqual;
}

CompareOp compare_op(TokenKind kind) {
  switch (kind) {
    case TokenKind::Less: return CompareOp::Less;
    case TokenKind::LessEqual: return CompareOp::LessEqual;
    case TokenKind::Greater: return CompareOp::Greater;
    case TokenKind::GreaterEqual: return CompareOp::GreaterEqual;
    case TokenKind::EqualEqual: return CompareOp::Equal;
    default: return CompareOp::NotEqual;
  }
}

// Tokens that begin an operand other than a negation. After `sum|max|min (names)`, one of these
// makes the construct a reduction; `max(a, b) - c` stays an elementwise call.
bool starts_operand_without_minus(TokenKind kind) {
  switch (kind) {
    case TokenKind::Integer:
    case TokenKind::Float:
    case TokenKind::Name:
    case TokenKind::Inf:
    case TokenKind::LParen:
    case TokenKind::Sum:
    case TokenKind::Max:
    case TokenKind::Min:
    case TokenKind::Select: return true;
    default: return false;
  }
}

ReduceOp reduce_op(TokenKind kind) {
  return kind == TokenKind::Sum ? ReduceOp::Sum
         : kind == TokenKind::Max ? ReduceOp::Max
                                  : ReduceOp::Min;
}

class Parser {
 public:
  Parser(SourceFilePtr file, DiagnosticEngine& diagnostics)
      : file_(std::move(file)),
        text_(file_->text()),
        diagnostics_(diagnostics),
        tokens_(tokenize(text_)) {}

  Program run();

 private:
  friend class Nesting;

  // --- Tokens -------------------------------------------------------------------------------
  const Token& peek(size_t ahead = 0) const {
    return tokens_[std::min(pos_ + ahead, tokens_.size() - 1)];
  }
  TokenKind kind(size_t ahead = 0) const { return peek(ahead).kind; }
  bool at(TokenKind k) const { return kind() == k; }
  bool at_line_end() const { return at(TokenKind::Newline) || at(TokenKind::End); }
  std::string_view text(const Token& token) const { return file_->slice(token.range); }
  std::string describe(const Token& token) const {
    return describe_token(token.kind, text(token));
  }
  const Token& advance() {
    const Token& token = tokens_[pos_];
    if (token.kind != TokenKind::End) ++pos_;
    last_end_ = token.range.end;
    return token;
  }
  bool accept(TokenKind k) {
    if (!at(k)) return false;
    advance();
    return true;
  }
  SourceRange since(const Token& first) const {
    return SourceRange::at(first.range.begin, std::max(first.range.begin, last_end_));
  }

  // --- Errors -------------------------------------------------------------------------------
  // Reports "expected X, found Y" at the current token, or the lexer's message when the current
  // token is an Invalid one (which is then consumed). Returns the diagnostic so that callers can
  // attach notes, or nullptr for an Invalid token.
  Diagnostic* fail_expected(const std::string& expected);
  void skip_line();
  bool within_depth(int depth, const SourceRange& where);

  // --- Statements ---------------------------------------------------------------------------
  bool parse_statement(Statement& statement);
  bool parse_let(Statement& statement);
  bool parse_input(Statement& statement);
  bool parse_definition(Statement& statement);
  bool expect_name(const char* what, const std::string& expected, std::string* name,
                   SourceRange* range);
  bool parse_dtype(Statement& statement);
  std::optional<int64_t> integer_value(const Token& token);
  std::optional<int64_t> parse_signed_integer(const std::string& expected, SourceRange* range);

  // --- Value expressions --------------------------------------------------------------------
  Parsed<Expr> parse_sum(const std::string& expected);
  Parsed<Expr> parse_product(const std::string& expected);
  Parsed<Expr> parse_unary(const std::string& expected);
  Parsed<Expr> parse_atom(const std::string& expected);
  Parsed<Expr> parse_number();
  Parsed<Expr> parse_reduction();
  Parsed<Expr> parse_access();
  Parsed<Expr> parse_call();
  Parsed<Expr> parse_select();
  bool reduction_ahead() const;
  void report_sum_without_body();
  Parsed<Expr> make_binary(const Token& op, Parsed<Expr> lhs, Parsed<Expr> rhs);

  // --- Index expressions and conditions -----------------------------------------------------
  Parsed<IndexExpr> parse_index(const std::string& expected);
  Parsed<IndexExpr> parse_index_term(const std::string& expected);
  Parsed<IndexExpr> parse_index_unary(const std::string& expected);
  Parsed<IndexExpr> parse_index_atom(const std::string& expected);
  Parsed<Condition> parse_condition();
  Parsed<Condition> parse_conjunction(const std::string& expected);
  Parsed<Condition> parse_comparison(const std::string& expected);

  SourceFilePtr file_;
  const std::string& text_;
  DiagnosticEngine& diagnostics_;
  std::vector<Token> tokens_;
  size_t pos_ = 0;
  uint32_t last_end_ = 0;  // end offset of the last consumed token
  int nesting_ = 0;
};

// One level of syntactic nesting (a parenthesis, an index list, a call, a reduction, a unary
// minus). Past kMaxNesting the construct is refused with an error, which bounds the parser's own
// recursion on inputs such as 100000 '(' in a row.
class Nesting {
 public:
  explicit Nesting(Parser& parser) : parser_(parser) {
    ok_ = ++parser_.nesting_ <= kMaxNesting;
    if (!ok_) {
      parser_.diagnostics_.error(parser_.peek().range,
                                 "expression nested too deeply (more than " +
                                     std::to_string(kMaxNesting) + " levels)");
    }
  }
  ~Nesting() { --parser_.nesting_; }
  Nesting(const Nesting&) = delete;
  Nesting& operator=(const Nesting&) = delete;
  bool ok() const { return ok_; }

 private:
  Parser& parser_;
  bool ok_ = false;
};

Program Parser::run() {
  Program program;
  program.file = file_;
  while (!at(TokenKind::End)) {
    if (accept(TokenKind::Newline)) continue;
    Statement statement;
    nesting_ = 0;
    if (parse_statement(statement)) {
      program.statements.push_back(std::move(statement));
    } else {
      skip_line();
    }
  }
  return program;
}

Diagnostic* Parser::fail_expected(const std::string& expected) {
  const Token& token = peek();
  if (token.kind == TokenKind::Invalid) {
    diagnostics_.error(token.range, describe_invalid_token(text(token)));
    advance();
    return nullptr;
  }
  return &diagnostics_.error(token.range, "expected " + expected + ", found " + describe(token));
}

// Error recovery: the rest of the line is dropped. Unexpected characters in it are still
// reported (they are independent mistakes); nothing else is.
void Parser::skip_line() {
  while (!at_line_end()) {
    const Token& token = advance();
    if (token.kind == TokenKind::Invalid) {
      diagnostics_.error(token.range, describe_invalid_token(text(token)));
    }
  }
}

bool Parser::within_depth(int depth, const SourceRange& where) {
  if (depth <= kMaxExpressionDepth) return true;
  diagnostics_.error(where, "expression too deep (more than " +
                                std::to_string(kMaxExpressionDepth) +
                                " levels of operators); split it into several statements");
  return false;
}

// ---------------------------------------------------------------------------------------------
// Statements

bool Parser::parse_statement(Statement& statement) {
  const Token& first = peek();
  bool ok = false;
  switch (first.kind) {
    case TokenKind::Let: ok = parse_let(statement); break;
    case TokenKind::Input: ok = parse_input(statement); break;
    case TokenKind::Output:
    case TokenKind::Name: ok = parse_definition(statement); break;
    default:
      if (is_keyword(first.kind) && kind(1) == TokenKind::LBracket) {
        diagnostics_.error(first.range, "'" + shorten_name(text(first)) +
                                            "' is a reserved word and cannot name a tensor");
      } else {
        fail_expected("a statement (let, input, output or NAME[...] = ...)");
      }
      return false;
  }
  if (ok) statement.range = since(first);
  return ok;
}

// Consumes a NAME that names a `what` (tensor, size, index variable). Keywords and function
// names are refused with a message saying so; anything else gets "expected <expected>".
bool Parser::expect_name(const char* what, const std::string& expected, std::string* name,
                         SourceRange* range) {
  const Token& token = peek();
  if (token.kind == TokenKind::Name && !find_func(text(token))) {
    *name = std::string(text(token));
    *range = token.range;
    advance();
    return true;
  }
  if (token.kind == TokenKind::Name) {
    diagnostics_.error(token.range, "'" + shorten_name(text(token)) +
                                        "' is a function name and cannot name " + what);
  } else if (is_keyword(token.kind)) {
    diagnostics_.error(token.range, "'" + shorten_name(text(token)) +
                                        "' is a reserved word and cannot name " + what);
  } else {
    fail_expected(expected);
  }
  return false;
}

std::optional<int64_t> Parser::integer_value(const Token& token) {
  std::string_view digits = text(token);
  int64_t value = 0;
  auto [end, error] = std::from_chars(digits.data(), digits.data() + digits.size(), value);
  if (error != std::errc() || end != digits.data() + digits.size()) {
    diagnostics_.error(token.range, describe(token) + " does not fit in 64 bits (the largest "
                                                      "integer is 9223372036854775807)");
    return std::nullopt;
  }
  return value;
}

// ['-'] INTEGER, as in `let M = 64` and `input X[64]`. Negative values parse so that sema can
// say "must be at least 1" instead of a syntax error.
std::optional<int64_t> Parser::parse_signed_integer(const std::string& expected,
                                                    SourceRange* range) {
  const Token& first = peek();
  bool negative = accept(TokenKind::Minus);
  if (!at(TokenKind::Integer)) {
    fail_expected(expected);
    return std::nullopt;
  }
  std::optional<int64_t> value = integer_value(advance());
  if (!value) return std::nullopt;
  *range = since(first);
  return negative ? -*value : *value;
}

bool Parser::parse_let(Statement& statement) {
  statement.kind = StatementKind::Let;
  advance();  // let
  for (bool first = true;; first = false) {
    SizeBinding binding;
    if (!expect_name("a size", first ? "a size name after 'let'" : "a size name after ','",
                     &binding.name, &binding.name_range)) {
      return false;
    }
    if (!accept(TokenKind::Assign)) {
      fail_expected("'=' after '" + shorten_name(binding.name) + "'");
      return false;
    }
    std::optional<int64_t> value =
        parse_signed_integer("an integer value for '" + shorten_name(binding.name) + "'",
                             &binding.value_range);
    if (!value) return false;
    binding.value = *value;
    statement.sizes.push_back(std::move(binding));
    if (at_line_end()) return true;
    if (!accept(TokenKind::Comma)) {
      fail_expected("',' or end of line after the value of '" +
                    shorten_name(statement.sizes.back().name) + "'");
      return false;
    }
  }
}

// Names other tools give the spec language's dtypes, and what to write instead. The 32-bit
// integer and other wide types are refused with the reason: sums accumulate in f32 anyway.
std::string dtype_spelling_hint(std::string_view name) {
  static const std::pair<std::string_view, std::string_view> kAliases[] = {
      {"fp8", "fp8e4m3 or fp8e5m2"},       {"f8", "fp8e4m3 or fp8e5m2"},
      {"e4m3", "fp8e4m3"},                 {"fp8e4m3fn", "fp8e4m3"},
      {"float8_e4m3fn", "fp8e4m3"},        {"f8e4m3", "fp8e4m3"},
      {"e5m2", "fp8e5m2"},                 {"float8_e5m2", "fp8e5m2"},
      {"f8e5m2", "fp8e5m2"},               {"i8", "int8"},
      {"s8", "int8"},                      {"int8_t", "int8"},
      {"i4", "int4"},                      {"s4", "int4"},
      {"uint4", "int4 (signed: store w - 8 and add 8 back in the spec)"},
      {"fp16", "f16"},                     {"half", "f16"},
      {"float16", "f16"},                  {"bfloat16", "bf16"},
      {"fp32", "f32"},                     {"float", "f32"},
      {"float32", "f32"},
  };
  for (const auto& [alias, spelling] : kAliases) {
    if (name == alias) return " (write " + std::string(spelling) + ")";
  }
  if (name == "i32" || name == "int32" || name == "s32" || name == "f64" || name == "fp64") {
    return " (tensors store at most 32-bit floats; arithmetic and sums are done in f32)";
  }
  return "";
}

bool Parser::parse_dtype(Statement& statement) {
  const Token& token = peek();
  if (token.kind != TokenKind::Name) {
    fail_expected(std::string("a dtype (") + tensor_dtype_list() + ") after ':'");
    return false;
  }
  std::optional<DType> dtype = parse_tensor_dtype(text(token));
  if (!dtype) {
    diagnostics_.error(token.range, "unknown dtype " + describe(token) +
                                        "; expected one of f32, f16, bf16, fp8e4m3, fp8e5m2, int8, int4" +
                                        dtype_spelling_hint(text(token)));
    return false;
  }
  advance();
  statement.has_dtype = true;
  statement.dtype = *dtype;
  statement.dtype_range = token.range;
  return true;
}

bool Parser::parse_input(Statement& statement) {
  statement.kind = StatementKind::Input;
  advance();  // input
  if (!expect_name("a tensor", "a tensor name after 'input'", &statement.name,
                   &statement.name_range)) {
    return false;
  }
  const std::string quoted = "'" + shorten_name(statement.name) + "'";
  if (!accept(TokenKind::LBracket)) {
    fail_expected("'[' after " + quoted + " to give its shape");
    return false;
  }
  for (;;) {
    DimensionSpec dim;
    std::string expected = "a size (a name or an integer) for dimension " +
                           std::to_string(statement.dims.size() + 1) + " of " + quoted;
    if (at(TokenKind::Minus) || at(TokenKind::Integer)) {
      std::optional<int64_t> value = parse_signed_integer(expected, &dim.range);
      if (!value) return false;
      dim.literal = *value;
    } else if (!expect_name("a size", expected, &dim.symbol, &dim.range)) {
      return false;
    }
    statement.dims.push_back(std::move(dim));
    if (accept(TokenKind::RBracket)) break;
    if (!accept(TokenKind::Comma)) {
      fail_expected("']' to close the shape of " + quoted);
      return false;
    }
  }
  if (!accept(TokenKind::Colon)) {
    fail_expected("':' and a dtype after the shape of input " + quoted +
                  " (inputs must declare " + tensor_dtype_list() + ")");
    return false;
  }
  if (!parse_dtype(statement)) return false;
  if (!at_line_end()) {
    fail_expected("end of line after the dtype of " + quoted);
    return false;
  }
  return true;
}

bool Parser::parse_definition(Statement& statement) {
  statement.kind = StatementKind::Define;
  statement.is_output = accept(TokenKind::Output);
  if (!expect_name("a tensor", "a tensor name after 'output'", &statement.name,
                   &statement.name_range)) {
    return false;
  }
  const std::string quoted = "'" + shorten_name(statement.name) + "'";
  if (!accept(TokenKind::LBracket)) {
    fail_expected("'[' after " + quoted + " to list its index variables");
    return false;
  }
  for (;;) {
    LhsIndex index;
    if (!expect_name("an index variable",
                     "an index variable name in the left-hand side of " + quoted, &index.name,
                     &index.range)) {
      return false;
    }
    statement.lhs.push_back(std::move(index));
    if (accept(TokenKind::RBracket)) break;
    if (!accept(TokenKind::Comma)) {
      fail_expected("']' to close the left-hand side of " + quoted);
      return false;
    }
  }
  if (accept(TokenKind::Colon) && !parse_dtype(statement)) return false;
  if (!accept(TokenKind::Assign)) {
    fail_expected("'=' after the left-hand side of " + quoted);
    return false;
  }
  Parsed<Expr> value = parse_sum("an expression after '='");
  if (!value) return false;
  statement.value = std::move(value.node);
  if (!at_line_end()) {
    fail_expected("an operator or end of line");
    return false;
  }
  return true;
}

// ---------------------------------------------------------------------------------------------
// Value expressions

Parsed<Expr> Parser::make_binary(const Token& op, Parsed<Expr> lhs, Parsed<Expr> rhs) {
  int depth = 1 + std::max(lhs.depth, rhs.depth);
  if (!within_depth(depth, op.range)) return {};
  auto node = std::make_unique<Expr>();
  node->kind = ExprKind::Binary;
  node->binary_op = op.kind == TokenKind::Plus    ? BinaryOp::Add
                    : op.kind == TokenKind::Minus ? BinaryOp::Sub
                    : op.kind == TokenKind::Star  ? BinaryOp::Mul
                                                  : BinaryOp::Div;
  node->range = lhs.node->range.merge(rhs.node->range);
  node->operands.push_back(std::move(lhs.node));
  node->operands.push_back(std::move(rhs.node));
  return {std::move(node), depth};
}

Parsed<Expr> Parser::parse_sum(const std::string& expected) {
  Parsed<Expr> lhs = parse_product(expected);
  while (lhs && (at(TokenKind::Plus) || at(TokenKind::Minus))) {
    const Token& op = advance();
    Parsed<Expr> rhs = parse_product("an operand after '" + std::string(text(op)) + "'");
    if (!rhs) return {};
    lhs = make_binary(op, std::move(lhs), std::move(rhs));
  }
  return lhs;
}

Parsed<Expr> Parser::parse_product(const std::string& expected) {
  Parsed<Expr> lhs = parse_unary(expected);
  while (lhs && (at(TokenKind::Star) || at(TokenKind::Slash))) {
    const Token& op = advance();
    Parsed<Expr> rhs = parse_unary("an operand after '" + std::string(text(op)) + "'");
    if (!rhs) return {};
    lhs = make_binary(op, std::move(lhs), std::move(rhs));
  }
  return lhs;
}

Parsed<Expr> Parser::parse_unary(const std::string& expected) {
  if (at(TokenKind::Minus)) {
    Nesting nesting(*this);
    if (!nesting.ok()) return {};
    const Token& minus = advance();
    Parsed<Expr> operand = parse_unary("an operand after '-'");
    if (!operand || !within_depth(operand.depth + 1, minus.range)) return {};
    auto node = std::make_unique<Expr>();
    node->kind = ExprKind::Neg;
    node->range = minus.range.merge(operand.node->range);
    node->operands.push_back(std::move(operand.node));
    return {std::move(node), operand.depth + 1};
  }
  if (at(TokenKind::Sum) || at(TokenKind::Max) || at(TokenKind::Min)) {
    if (reduction_ahead()) return parse_reduction();
    if (at(TokenKind::Sum)) {
      report_sum_without_body();
      return {};
    }
    return parse_call();  // max(a, b), min(a, b)
  }
  return parse_atom(expected);
}

// `sum|max|min ( NAME {, NAME} )` followed by a token that starts an operand (not '-').
bool Parser::reduction_ahead() const {
  if (kind(1) != TokenKind::LParen) return false;
  size_t i = 2;
  for (;;) {
    if (kind(i) != TokenKind::Name) return false;
    ++i;
    if (kind(i) == TokenKind::RParen) break;
    if (kind(i) != TokenKind::Comma) return false;
    ++i;
  }
  return starts_operand_without_minus(kind(i + 1));
}

void Parser::report_sum_without_body() {
  const Token& sum = peek();
  if (kind(1) != TokenKind::LParen) {
    advance();
    fail_expected("'(' after 'sum'");
    return;
  }
  // When the parentheses hold only names, show them in the suggestion.
  std::string vars;
  bool only_names = false;
  size_t i = 2;
  while (kind(i) == TokenKind::Name) {
    if (!vars.empty()) vars += ", ";
    vars += text(peek(i));
    if (kind(i + 1) == TokenKind::RParen) {
      only_names = true;
      i += 2;  // i is now the token after ')'
      break;
    }
    if (kind(i + 1) != TokenKind::Comma) break;
    i += 2;
  }
  if (only_names && kind(i) == TokenKind::Minus) {
    diagnostics_.error(sum.range, "sum needs a body that does not start with '-': write sum(" +
                                      vars + ") (-expr)");
  } else if (only_names) {
    diagnostics_.error(sum.range, "sum needs a body: write sum(" + vars + ") expr");
  } else {
    diagnostics_.error(sum.range,
                       "sum needs a body: write sum(n) expr (sum is a reduction over the index "
                       "variables in parentheses, not a function)");
  }
}

Parsed<Expr> Parser::parse_reduction() {
  Nesting nesting(*this);
  if (!nesting.ok()) return {};
  const Token& keyword = advance();
  auto node = std::make_unique<Expr>();
  node->kind = ExprKind::Reduce;
  node->reduce_op = reduce_op(keyword.kind);
  advance();  // '(' (checked by reduction_ahead, as are the names and ')')
  do {
    ReduceVar var;
    if (!expect_name("an index variable", "a reduction variable", &var.name, &var.range)) return {};
    node->reduce_vars.push_back(std::move(var));
  } while (accept(TokenKind::Comma));
  advance();  // ')'
  Parsed<Expr> body = parse_sum("the body of the reduction");
  if (!body) return {};
  int depth = body.depth + 1;
  if (!within_depth(depth, keyword.range)) return {};
  node->range = keyword.range.merge(body.node->range);
  node->operands.push_back(std::move(body.node));
  return {std::move(node), depth};
}

Parsed<Expr> Parser::parse_atom(const std::string& expected) {
  const Token& token = peek();
  switch (token.kind) {
    case TokenKind::Integer:
    case TokenKind::Float: return parse_number();
    case TokenKind::Inf: {
      advance();
      auto node = std::make_unique<Expr>();
      node->kind = ExprKind::Number;
      node->number = std::numeric_limits<double>::infinity();
      node->range = token.range;
      return {std::move(node), 1};
    }
    case TokenKind::LParen: {
      Nesting nesting(*this);
      if (!nesting.ok()) return {};
      const Token& open = advance();
      Parsed<Expr> inner = parse_sum("an expression after '('");
      if (!inner) return {};
      if (!accept(TokenKind::RParen)) {
        if (Diagnostic* d = fail_expected("')' to close '('")) {
          d->notes.push_back({open.range, "the '(' is here"});
        }
        return {};
      }
      inner.node->range = since(open);
      return inner;
    }
    case TokenKind::Name: {
      if (kind(1) == TokenKind::LBracket) return parse_access();
      if (kind(1) == TokenKind::LParen) return parse_call();
      if (find_func(text(token))) {
        diagnostics_.error(token.range, "'" + shorten_name(text(token)) +
                                            "' is a function; expected '(' after it");
        return {};
      }
      advance();
      auto node = std::make_unique<Expr>();
      node->kind = ExprKind::Name;
      node->name = std::string(text(token));
      node->range = token.range;
      return {std::move(node), 1};
    }
    case TokenKind::Select: return parse_select();
    default: fail_expected(expected); return {};
  }
}

Parsed<Expr> Parser::parse_number() {
  const Token& token = advance();
  auto node = std::make_unique<Expr>();
  node->kind = ExprKind::Number;
  node->range = token.range;
  if (token.kind == TokenKind::Integer) {
    std::optional<int64_t> value = integer_value(token);
    if (!value) return {};
    node->number = static_cast<double>(*value);
  } else {
    node->number = std::strtod(std::string(text(token)).c_str(), nullptr);
    if (std::isinf(node->number)) {
      diagnostics_.error(token.range, describe(token) + " is too large for a float");
      return {};
    }
  }
  return {std::move(node), 1};
}

Parsed<Expr> Parser::parse_access() {
  Nesting nesting(*this);
  if (!nesting.ok()) return {};
  const Token& name = advance();
  advance();  // '['
  auto node = std::make_unique<Expr>();
  node->kind = ExprKind::Access;
  node->name = std::string(text(name));
  node->name_range = name.range;
  const std::string quoted = "'" + shorten_name(node->name) + "'";
  int depth = 0;
  for (;;) {
    Parsed<IndexExpr> index = parse_index("an index of " + quoted);
    if (!index) return {};
    depth = std::max(depth, index.depth);
    node->indices.push_back(std::move(index.node));
    if (accept(TokenKind::RBracket)) break;
    if (!accept(TokenKind::Comma)) {
      fail_expected("']' to close the index list of " + quoted);
      return {};
    }
  }
  node->range = since(name);
  if (!within_depth(depth + 1, name.range)) return {};
  return {std::move(node), depth + 1};
}

// NAME(args) for any NAME (sema checks that it is a function), and max(a, b) / min(a, b).
Parsed<Expr> Parser::parse_call() {
  Nesting nesting(*this);
  if (!nesting.ok()) return {};
  const Token& name = advance();
  auto node = std::make_unique<Expr>();
  node->kind = ExprKind::Call;
  node->name = std::string(text(name));
  node->name_range = name.range;
  const std::string quoted = "'" + shorten_name(node->name) + "'";
  if (!at(TokenKind::LParen)) {
    fail_expected("'(' after " + quoted);
    return {};
  }
  const Token& open = advance();
  int depth = 0;
  for (;;) {
    Parsed<Expr> argument = parse_sum("an argument of " + quoted);
    if (!argument) return {};
    depth = std::max(depth, argument.depth);
    node->operands.push_back(std::move(argument.node));
    if (accept(TokenKind::RParen)) break;
    if (!accept(TokenKind::Comma)) {
      if (Diagnostic* d = fail_expected("')' to close the arguments of " + quoted)) {
        d->notes.push_back({open.range, "the '(' is here"});
      }
      return {};
    }
  }
  node->range = since(name);
  if (!within_depth(depth + 1, name.range)) return {};
  return {std::move(node), depth + 1};
}

Parsed<Expr> Parser::parse_select() {
  Nesting nesting(*this);
  if (!nesting.ok()) return {};
  const Token& keyword = advance();
  if (!at(TokenKind::LParen)) {
    fail_expected("'(' after 'select'");
    return {};
  }
  const Token& open = advance();
  auto node = std::make_unique<Expr>();
  node->kind = ExprKind::Select;
  Parsed<Condition> condition = parse_condition();
  if (!condition) return {};
  node->condition = std::move(condition.node);
  int depth = condition.depth;
  if (!accept(TokenKind::Comma)) {
    fail_expected("',' after the condition of select");
    return {};
  }
  Parsed<Expr> when_true = parse_sum("the value of select where the condition holds");
  if (!when_true) return {};
  depth = std::max(depth, when_true.depth);
  node->operands.push_back(std::move(when_true.node));
  if (!accept(TokenKind::Comma)) {
    fail_expected("',' after the second argument of select");
    return {};
  }
  Parsed<Expr> when_false = parse_sum("the value of select where the condition fails");
  if (!when_false) return {};
  depth = std::max(depth, when_false.depth);
  node->operands.push_back(std::move(when_false.node));
  if (!accept(TokenKind::RParen)) {
    if (Diagnostic* d = fail_expected("')' to close select(...)")) {
      d->notes.push_back({open.range, "the '(' is here"});
    }
    return {};
  }
  node->range = since(keyword);
  if (!within_depth(depth + 1, keyword.range)) return {};
  return {std::move(node), depth + 1};
}

// ---------------------------------------------------------------------------------------------
// Index expressions and conditions

Parsed<IndexExpr> make_index_binary(IndexKind kind, Parsed<IndexExpr> lhs,
                                    Parsed<IndexExpr> rhs) {
  auto node = std::make_unique<IndexExpr>();
  node->kind = kind;
  node->range = lhs.node->range.merge(rhs.node->range);
  node->lhs = std::move(lhs.node);
  node->rhs = std::move(rhs.node);
  return {std::move(node), 1 + std::max(lhs.depth, rhs.depth)};
}

Parsed<IndexExpr> Parser::parse_index(const std::string& expected) {
  Parsed<IndexExpr> lhs = parse_index_term(expected);
  while (lhs && (at(TokenKind::Plus) || at(TokenKind::Minus))) {
    const Token& op = advance();
    Parsed<IndexExpr> rhs = parse_index_term("an operand after '" + std::string(text(op)) + "'");
    if (!rhs) return {};
    lhs = make_index_binary(op.kind == TokenKind::Plus ? IndexKind::Add : IndexKind::Sub,
                            std::move(lhs), std::move(rhs));
    if (!within_depth(lhs.depth, op.range)) return {};
  }
  return lhs;
}

Parsed<IndexExpr> Parser::parse_index_term(const std::string& expected) {
  Parsed<IndexExpr> lhs = parse_index_unary(expected);
  while (lhs && (at(TokenKind::Star) || at(TokenKind::Slash) || at(TokenKind::Percent))) {
    const Token& op = advance();
    Parsed<IndexExpr> rhs = parse_index_unary("an operand after '" + std::string(text(op)) + "'");
    if (!rhs) return {};
    IndexKind kind = op.kind == TokenKind::Star    ? IndexKind::Mul
                     : op.kind == TokenKind::Slash ? IndexKind::FloorDiv
                                                   : IndexKind::Mod;
    lhs = make_index_binary(kind, std::move(lhs), std::move(rhs));
    if (!within_depth(lhs.depth, op.range)) return {};
  }
  return lhs;
}

Parsed<IndexExpr> Parser::parse_index_unary(const std::string& expected) {
  if (!at(TokenKind::Minus)) return parse_index_atom(expected);
  Nesting nesting(*this);
  if (!nesting.ok()) return {};
  const Token& minus = advance();
  Parsed<IndexExpr> operand = parse_index_unary("an operand after '-'");
  if (!operand || !within_depth(operand.depth + 1, minus.range)) return {};
  auto node = std::make_unique<IndexExpr>();
  node->kind = IndexKind::Neg;
  node->range = minus.range.merge(operand.node->range);
  node->lhs = std::move(operand.node);
  return {std::move(node), operand.depth + 1};
}

Parsed<IndexExpr> Parser::parse_index_atom(const std::string& expected) {
  const Token& token = peek();
  switch (token.kind) {
    case TokenKind::Integer: {
      std::optional<int64_t> value = integer_value(token);
      if (!value) return {};
      advance();
      auto node = std::make_unique<IndexExpr>();
      node->kind = IndexKind::Literal;
      node->literal = *value;
      node->range = token.range;
      return {std::move(node), 1};
    }
    case TokenKind::Name: {
      if (kind(1) == TokenKind::LBracket) {
        diagnostics_.error(token.range,
                           "tensor reads are not allowed in index expressions; expected " +
                               expected + " made of index variables, sizes and integers");
        return {};
      }
      if (kind(1) == TokenKind::LParen || find_func(text(token))) {
        diagnostics_.error(token.range,
                           "functions are not allowed in index expressions; expected " +
                               expected + " made of index variables, sizes and integers");
        return {};
      }
      advance();
      auto node = std::make_unique<IndexExpr>();
      node->kind = IndexKind::Name;
      node->name = std::string(text(token));
      node->range = token.range;
      return {std::move(node), 1};
    }
    case TokenKind::Float:
      diagnostics_.error(token.range, "index expressions use integers; found " + describe(token));
      return {};
    case TokenKind::LParen: {
      Nesting nesting(*this);
      if (!nesting.ok()) return {};
      const Token& open = advance();
      Parsed<IndexExpr> inner = parse_index("an index expression after '('");
      if (!inner) return {};
      if (is_comparison(kind())) {
        diagnostics_.error(peek().range,
                           "a condition cannot be put in parentheses; write the comparisons "
                           "joined by 'and' / 'or' ('and' binds tighter)");
        return {};
      }
      if (!accept(TokenKind::RParen)) {
        if (Diagnostic* d = fail_expected("')' to close '('")) {
          d->notes.push_back({open.range, "the '(' is here"});
        }
        return {};
      }
      inner.node->range = since(open);
      return inner;
    }
    default: fail_expected(expected); return {};
  }
}

Parsed<Condition> make_condition(Condition::Kind kind, Parsed<Condition> lhs,
                                 Parsed<Condition> rhs) {
  auto node = std::make_unique<Condition>();
  node->kind = kind;
  node->range = lhs.node->range.merge(rhs.node->range);
  node->lhs = std::move(lhs.node);
  node->rhs = std::move(rhs.node);
  return {std::move(node), 1 + std::max(lhs.depth, rhs.depth)};
}

Parsed<Condition> Parser::parse_condition() {
  Parsed<Condition> lhs = parse_conjunction("a condition");
  while (lhs && at(TokenKind::Or)) {
    const Token& op = advance();
    Parsed<Condition> rhs = parse_conjunction("a comparison after 'or'");
    if (!rhs) return {};
    lhs = make_condition(Condition::Kind::Or, std::move(lhs), std::move(rhs));
    if (!within_depth(lhs.depth, op.range)) return {};
  }
  return lhs;
}

Parsed<Condition> Parser::parse_conjunction(const std::string& expected) {
  Parsed<Condition> lhs = parse_comparison(expected);
  while (lhs && at(TokenKind::And)) {
    const Token& op = advance();
    Parsed<Condition> rhs = parse_comparison("a comparison after 'and'");
    if (!rhs) return {};
    lhs = make_condition(Condition::Kind::And, std::move(lhs), std::move(rhs));
    if (!within_depth(lhs.depth, op.range)) return {};
  }
  return lhs;
}

Parsed<Condition> Parser::parse_comparison(const std::string& expected) {
  Parsed<IndexExpr> lhs = parse_index(expected);
  if (!lhs) return {};
  if (at(TokenKind::Assign)) {
    diagnostics_.error(peek().range, "expected a comparison operator; write '==' to test equality");
    return {};
  }
  if (!is_comparison(kind())) {
    fail_expected("a comparison operator (<, <=, >, >=, ==, !=)");
    return {};
  }
  const Token& op = advance();
  Parsed<IndexExpr> rhs = parse_index("an index expression after '" + std::string(text(op)) + "'");
  if (!rhs) return {};
  auto node = std::make_unique<Condition>();
  node->kind = Condition::Kind::Compare;
  node->compare = compare_op(op.kind);
  node->range = lhs.node->range.merge(rhs.node->range);
  int depth = 1 + std::max(lhs.depth, rhs.depth);
  if (!within_depth(depth, op.range)) return {};
  node->lhs_index = std::move(lhs.node);
  node->rhs_index = std::move(rhs.node);
  return {std::move(node), depth};
}

}  // namespace

Program parse_program(SourceFilePtr file, DiagnosticEngine& diagnostics) {
  return Parser(std::move(file), diagnostics).run();
}

}  // namespace nautilus::spec

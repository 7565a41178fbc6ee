// Tokens of the `.nt` spec language.
//
// The lexer turns any byte sequence into tokens and never fails: bytes that cannot start a token
// become one `Invalid` token per maximal run (so a block of binary garbage is one token and, in
// the parser, one diagnostic). It reports nothing itself; the parser reports an `Invalid` token,
// with `describe_invalid_token`, when it reaches it, so that diagnostics come out in source order.
//
//   NAME     [A-Za-z_][A-Za-z0-9_]*        keywords (let input output sum max min select and or
//                                          inf) get their own kinds; function names are NAMEs
//   INTEGER  [0-9]+
//   FLOAT    [0-9]+ '.' [0-9]* [exponent] | [0-9]+ exponent, exponent = [eE][+-]?[0-9]+
//   '#' starts a comment up to the end of the line; ' ', '\t', '\r', '\f', '\v' separate tokens;
//   '\n' is a token (statements end at a newline). The last token is always `End`.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "core/support/source.h"

namespace nautilus::spec {

enum class TokenKind {
  Name,
  Integer,
  Float,
  // Keywords.
  Let,
  Input,
  Output,
  Sum,
  Max,
  Min,
  Select,
  And,
  Or,
  Inf,
  // Punctuation and operators.
  LParen,
  RParen,
  LBracket,
  RBracket,
  Comma,
  Colon,
  Assign,  // =
  Plus,
  Minus,
  Star,
  Slash,
  Percent,
  Less,
  LessEqual,
  Greater,
  GreaterEqual,
  EqualEqual,
  NotEqual,
  Newline,
  End,
  Invalid,  // a run of bytes that cannot start a token
};

struct Token {
  TokenKind kind = TokenKind::End;
  SourceRange range;
};

// Splits `text` into tokens; linear in its size. The result always ends with an `End` token.
std::vector<Token> tokenize(std::string_view text);

// True for the kinds of the reserved words above.
bool is_keyword(TokenKind kind);

// A name as diagnostics show it: cut to 40 characters plus "..." so that a 10 MB name (valid
// input) never makes a 10 MB message, nor a message per dimension that long.
std::string shorten_name(std::string_view name);

// How a token is named in "expected X, found Y" messages: "'abc'", "number '2.5'",
// "keyword 'sum'", "')'", "end of line", "end of file". `text` is the token's source text.
std::string describe_token(TokenKind kind, std::string_view text);

// The message for an Invalid token: "unexpected character '@'", or "unexpected characters
// '\xFF\xFE'" for a longer run. Bytes other than printable ASCII are written as \xNN and long
// runs are shortened, so the message is always one short printable line.
std::string describe_invalid_token(std::string_view text);

}  // namespace nautilus::spec

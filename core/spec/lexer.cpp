#include "core/spec/lexer.h"

#include <array>
#include <cstdint>
#include <cstdio>
#include <utility>

namespace nautilus::spec {

namespace {

bool is_name_start(char c) {
  return (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_';
}
bool is_digit(char c) { return c >= '0' && c <= '9'; }
bool is_name_char(char c) { return is_name_start(c) || is_digit(c); }
bool is_blank(char c) { return c == ' ' || c == '\t' || c == '\r' || c == '\f' || c == '\v'; }

constexpr std::array<std::pair<std::string_view, TokenKind>, 10> kKeywords = {{
    {"let", TokenKind::Let},
    {"input", TokenKind::Input},
    {"output", TokenKind::Output},
    {"sum", TokenKind::Sum},
    {"max", TokenKind::Max},
    {"min", TokenKind::Min},
    {"select", TokenKind::Select},
    {"and", TokenKind::And},
    {"or", TokenKind::Or},
    {"inf", TokenKind::Inf},
}};

TokenKind name_kind(std::string_view word) {
  for (const auto& [text, kind] : kKeywords) {
    if (word == text) return kind;
  }
  return TokenKind::Name;
}

// Length of the punctuation token at text[i] (0 when none starts there) and its kind.
std::pair<size_t, TokenKind> punctuation(std::string_view text, size_t i) {
  char c = text[i];
  char next = i + 1 < text.size() ? text[i + 1] : '\0';
  switch (c) {
    case '(': return {1, TokenKind::LParen};
    case ')': return {1, TokenKind::RParen};
    case '[': return {1, TokenKind::LBracket};
    case ']': return {1, TokenKind::RBracket};
    case ',': return {1, TokenKind::Comma};
    case ':': return {1, TokenKind::Colon};
    case '+': return {1, TokenKind::Plus};
    case '-': return {1, TokenKind::Minus};
    case '*': return {1, TokenKind::Star};
    case '/': return {1, TokenKind::Slash};
    case '%': return {1, TokenKind::Percent};
    case '=': return next == '=' ? std::pair{size_t{2}, TokenKind::EqualEqual}
                                 : std::pair{size_t{1}, TokenKind::Assign};
    case '<': return next == '=' ? std::pair{size_t{2}, TokenKind::LessEqual}
                                 : std::pair{size_t{1}, TokenKind::Less};
    case '>': return next == '=' ? std::pair{size_t{2}, TokenKind::GreaterEqual}
                                 : std::pair{size_t{1}, TokenKind::Greater};
    case '!': return next == '=' ? std::pair{size_t{2}, TokenKind::NotEqual}
                                 : std::pair{size_t{0}, TokenKind::Invalid};
    default: return {0, TokenKind::Invalid};
  }
}

// True when no token, separator or comment can start at text[i].
bool starts_nothing(std::string_view text, size_t i) {
  char c = text[i];
  if (is_name_start(c) || is_digit(c) || is_blank(c) || c == '\n' || c == '#') return false;
  return punctuation(text, i).first == 0;
}

// End of the number starting at text[begin] (a digit) and whether it is a float.
std::pair<size_t, bool> scan_number(std::string_view text, size_t begin) {
  size_t i = begin;
  while (i < text.size() && is_digit(text[i])) ++i;
  bool is_float = false;
  if (i < text.size() && text[i] == '.') {
    is_float = true;
    ++i;
    while (i < text.size() && is_digit(text[i])) ++i;
  }
  // An exponent only when digits follow, so that `2e` stays the number 2 and the name e.
  if (i < text.size() && (text[i] == 'e' || text[i] == 'E')) {
    size_t j = i + 1;
    if (j < text.size() && (text[j] == '+' || text[j] == '-')) ++j;
    if (j < text.size() && is_digit(text[j])) {
      is_float = true;
      i = j;
      while (i < text.size() && is_digit(text[i])) ++i;
    }
  }
  return {i, is_float};
}

}  // namespace

std::vector<Token> tokenize(std::string_view text) {
  std::vector<Token> tokens;
  auto add = [&](TokenKind kind, size_t begin, size_t end) {
    tokens.push_back({kind, SourceRange::at(static_cast<uint32_t>(begin),
                                            static_cast<uint32_t>(end))});
  };
  size_t i = 0;
  while (i < text.size()) {
    char c = text[i];
    if (is_blank(c)) {
      ++i;
    } else if (c == '\n') {
      add(TokenKind::Newline, i, i + 1);
      ++i;
    } else if (c == '#') {
      while (i < text.size() && text[i] != '\n') ++i;
    } else if (is_name_start(c)) {
      size_t begin = i;
      while (i < text.size() && is_name_char(text[i])) ++i;
      add(name_kind(text.substr(begin, i - begin)), begin, i);
    } else if (is_digit(c)) {
      auto [end, is_float] = scan_number(text, i);
      add(is_float ? TokenKind::Float : TokenKind::Integer, i, end);
      i = end;
    } else if (auto [length, kind] = punctuation(text, i); length > 0) {
      add(kind, i, i + length);
      i += length;
    } else {
      size_t begin = i;
      while (i < text.size() && starts_nothing(text, i)) ++i;
      add(TokenKind::Invalid, begin, i);
    }
  }
  add(TokenKind::End, text.size(), text.size());
  return tokens;
}

bool is_keyword(TokenKind kind) {
  for (const auto& entry : kKeywords) {
    if (entry.second == kind) return true;
  }
  return false;
}

std::string shorten_name(std::string_view name) {
  constexpr size_t kShown = 40;
  std::string shown(name.substr(0, kShown));
  if (name.size() > kShown) shown += "...";
  return shown;
}

std::string describe_token(TokenKind kind, std::string_view text) {
  std::string shown = shorten_name(text);
  switch (kind) {
    case TokenKind::Name: return "'" + shown + "'";
    case TokenKind::Integer:
    case TokenKind::Float: return "number '" + shown + "'";
    case TokenKind::Newline: return "end of line";
    case TokenKind::End: return "end of file";
    case TokenKind::Invalid: return describe_invalid_token(text);
    default: break;
  }
  if (is_keyword(kind)) return "keyword '" + shown + "'";
  return "'" + shown + "'";
}

std::string describe_invalid_token(std::string_view text) {
  constexpr size_t kShownBytes = 16;
  std::string shown;
  for (size_t i = 0; i < text.size() && i < kShownBytes; ++i) {
    unsigned char byte = static_cast<unsigned char>(text[i]);
    if (byte >= 0x20 && byte < 0x7f) {
      shown += static_cast<char>(byte);
    } else {
      char escaped[8];
      std::snprintf(escaped, sizeof escaped, "\\x%02X", byte);
      shown += escaped;
    }
  }
  if (text.size() > kShownBytes) shown += "...";
  // One UTF-8 character is one character even when it takes several bytes.
  size_t characters = 0;
  for (char c : text) {
    if ((static_cast<unsigned char>(c) & 0xC0) != 0x80) ++characters;
  }
  return (characters <= 1 ? "unexpected character '" : "unexpected characters '") + shown + "'";
}

}  // namespace nautilus::spec

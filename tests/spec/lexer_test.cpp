// Unit tests of the `.nt` lexer: token kinds, ranges, numbers, comments and invalid bytes.
#include "core/spec/lexer.h"

#include <gtest/gtest.h>

namespace nautilus::spec {
namespace {

std::vector<TokenKind> kinds(std::string_view text) {
  std::vector<TokenKind> out;
  for (const Token& token : tokenize(text)) out.push_back(token.kind);
  return out;
}

std::vector<std::string> texts(std::string_view text) {
  std::vector<std::string> out;
  for (const Token& token : tokenize(text)) {
    out.emplace_back(text.substr(token.range.begin, token.range.end - token.range.begin));
  }
  return out;
}

using K = TokenKind;

TEST(Lexer, EmptyInputIsJustEnd) {
  EXPECT_EQ(kinds(""), (std::vector<TokenKind>{K::End}));
  EXPECT_EQ(kinds("   \t\r"), (std::vector<TokenKind>{K::End}));
}

TEST(Lexer, Statement) {
  EXPECT_EQ(kinds("output O[b, m] : bf16 = sum(n) P[b, n] / L[b]\n"),
            (std::vector<TokenKind>{K::Output, K::Name, K::LBracket, K::Name, K::Comma, K::Name,
                                    K::RBracket, K::Colon, K::Name, K::Assign, K::Sum, K::LParen,
                                    K::Name, K::RParen, K::Name, K::LBracket, K::Name, K::Comma,
                                    K::Name, K::RBracket, K::Slash, K::Name, K::LBracket,
                                    K::Name, K::RBracket, K::Newline, K::End}));
}

TEST(Lexer, KeywordsAndFunctionNames) {
  EXPECT_EQ(kinds("let input output sum max min select and or inf"),
            (std::vector<TokenKind>{K::Let, K::Input, K::Output, K::Sum, K::Max, K::Min,
                                    K::Select, K::And, K::Or, K::Inf, K::End}));
  // Function names are ordinary names; the parser tells them apart.
  EXPECT_EQ(kinds("exp sqrt sums _x x1 Let"),
            (std::vector<TokenKind>{K::Name, K::Name, K::Name, K::Name, K::Name, K::Name,
                                    K::End}));
}

TEST(Lexer, Numbers) {
  EXPECT_EQ(kinds("12 1.5 2. 1e-05 3E+2 7e"),
            (std::vector<TokenKind>{K::Integer, K::Float, K::Float, K::Float, K::Float,
                                    K::Integer, K::Name, K::End}));
  EXPECT_EQ(texts("1e-05 7e"), (std::vector<std::string>{"1e-05", "7", "e", ""}));
}

TEST(Lexer, Operators) {
  EXPECT_EQ(kinds("< <= > >= == != = + - * / %"),
            (std::vector<TokenKind>{K::Less, K::LessEqual, K::Greater, K::GreaterEqual,
                                    K::EqualEqual, K::NotEqual, K::Assign, K::Plus, K::Minus,
                                    K::Star, K::Slash, K::Percent, K::End}));
  EXPECT_EQ(kinds("a<=b"), (std::vector<TokenKind>{K::Name, K::LessEqual, K::Name, K::End}));
}

TEST(Lexer, CommentsAndLines) {
  EXPECT_EQ(kinds("# header\nlet M = 4 # trailing\r\n\n"),
            (std::vector<TokenKind>{K::Newline, K::Let, K::Name, K::Assign, K::Integer,
                                    K::Newline, K::Newline, K::End}));
}

TEST(Lexer, RangesAreByteOffsets) {
  std::vector<Token> tokens = tokenize("ab  <= 7");
  ASSERT_EQ(tokens.size(), 4u);
  EXPECT_EQ(tokens[0].range, SourceRange::at(0, 2));
  EXPECT_EQ(tokens[1].range, SourceRange::at(4, 6));
  EXPECT_EQ(tokens[2].range, SourceRange::at(7, 8));
  EXPECT_EQ(tokens[3].range, SourceRange::at(8, 8));
}

TEST(Lexer, InvalidBytesFormOneTokenPerRun) {
  EXPECT_EQ(kinds("a @$? b"), (std::vector<TokenKind>{K::Name, K::Invalid, K::Name, K::End}));
  EXPECT_EQ(texts("a @$? b")[1], "@$?");
  // '!' alone cannot start a token; '!=' can.
  EXPECT_EQ(kinds("a ! b != c"),
            (std::vector<TokenKind>{K::Name, K::Invalid, K::Name, K::NotEqual, K::Name, K::End}));
  std::string garbage(100000, '\xff');
  EXPECT_EQ(kinds(garbage), (std::vector<TokenKind>{K::Invalid, K::End}));
}

TEST(Lexer, DescribesInvalidTokens) {
  EXPECT_EQ(describe_invalid_token("@"), "unexpected character '@'");
  EXPECT_EQ(describe_invalid_token("@$"), "unexpected characters '@$'");
  EXPECT_EQ(describe_invalid_token("\xff\x01"), "unexpected characters '\\xFF\\x01'");
  // One UTF-8 character (U+00B7, middle dot) is one character.
  EXPECT_EQ(describe_invalid_token("\xc2\xb7"), "unexpected character '\\xC2\\xB7'");
  EXPECT_EQ(describe_invalid_token(std::string(40, '?')),
            "unexpected characters '????????????????...'");
}

TEST(Lexer, DescribesTokens) {
  EXPECT_EQ(describe_token(K::Name, "Kx"), "'Kx'");
  EXPECT_EQ(describe_token(K::Float, "2.5"), "number '2.5'");
  EXPECT_EQ(describe_token(K::Sum, "sum"), "keyword 'sum'");
  EXPECT_EQ(describe_token(K::RParen, ")"), "')'");
  EXPECT_EQ(describe_token(K::Newline, "\n"), "end of line");
  EXPECT_EQ(describe_token(K::End, ""), "end of file");
  EXPECT_EQ(describe_token(K::Name, std::string(100, 'x')), "'" + std::string(40, 'x') + "...'");
}

}  // namespace
}  // namespace nautilus::spec

// The front end never crashes, hangs or recurses deeply on any input: empty files, binary
// garbage, 10 MB lines, 100000 levels of nesting, and thousands of random mutations of the
// shipped specs. Every outcome is either a spec without errors or at least one error.
#include <chrono>
#include <filesystem>

#include <gtest/gtest.h>

#include "core/spec/printer.h"
#include "core/support/rng.h"
#include "tests/spec/spec_test_support.h"

namespace nautilus::spec {
namespace {

using testing::load_text;
using testing::Loaded;

// The invariant every input must satisfy; a successful spec must also print.
void expect_consistent(const Loaded& loaded) {
  if (loaded.spec) {
    EXPECT_FALSE(loaded.diagnostics->has_errors());
    EXPECT_FALSE(print_spec(*loaded.spec).empty());
    EXPECT_FALSE(spec_to_dot(*loaded.spec).empty());
    EXPECT_FALSE(spec_to_json(*loaded.spec).empty());
  } else {
    EXPECT_GE(loaded.diagnostics->error_count(), 1);
  }
  // The engine keeps at most 50 errors, so garbage cannot flood the output.
  int stored_errors = 0;
  for (const Diagnostic& d : loaded.diagnostics->diagnostics()) {
    stored_errors += d.severity == Severity::Error;
  }
  EXPECT_LE(stored_errors, 50);
}

// Runs `load_text` and fails the test when it takes longer than a linear-time front end could:
// each input here takes a few seconds at most, even in a sanitizer build; a quadratic pass would
// take hours.
Loaded timed_load(const std::string& text, double limit_seconds = 120.0) {
  auto start = std::chrono::steady_clock::now();
  Loaded loaded = load_text(text);
  double seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  EXPECT_LT(seconds, limit_seconds);
  expect_consistent(loaded);
  return loaded;
}

TEST(Robustness, EmptyFile) {
  for (const std::string& text : {std::string(), std::string("\n\n"), std::string("# only\n")}) {
    Loaded loaded = load_text(text);
    EXPECT_EQ(loaded.spec, nullptr);
    EXPECT_EQ(loaded.headlines(),
              (std::vector<std::string>{"error: the spec defines no output: it has no definition "
                                        "(such as `output Y[i] = X[i]`)"}));
  }
}

TEST(Robustness, BinaryGarbage) {
  SplitMix64 rng(20261122);
  for (int file = 0; file < 200; ++file) {
    size_t length = rng.next() % (file < 190 ? 4096 : 1 << 20);
    std::string text(length, '\0');
    for (char& c : text) c = static_cast<char>(rng.next() & 0xff);
    timed_load(text);
  }
}

TEST(Robustness, ARunOfGarbageIsOneError) {
  Loaded loaded = load_text("input X[4] : f32\nY[i] = X[i] " + std::string(100000, '\x80') + "\n");
  EXPECT_EQ(loaded.diagnostics->error_count(), 1);
}

TEST(Robustness, TenMegabyteLines) {
  const size_t kTenMegabytes = 10u << 20;
  std::string header = "input X[4] : f32\n";

  // A comment.
  Loaded comment = timed_load(header + "# " + std::string(kTenMegabytes, 'c') + "\nY[i] = X[i]\n");
  EXPECT_TRUE(comment.spec);

  // A valid `let` of many sizes.
  std::string let = "let A0 = 1";
  for (int k = 1; let.size() < kTenMegabytes; ++k) let += ", A" + std::to_string(k) + " = 7";
  Loaded sizes = timed_load(let + "\n" + header + "Y[i] = X[i] * A1\n");
  ASSERT_TRUE(sizes.spec) << sizes.first_error();
  EXPECT_GT(sizes.spec->sizes.size(), 500000u);

  // An expression: refused once its tree passes the depth bound.
  std::string sum = "Y[i] = X[i]";
  while (sum.size() < kTenMegabytes) sum += " + X[i]";
  Loaded deep = timed_load(header + sum + "\n");
  EXPECT_NE(deep.first_error().find("expression too deep"), std::string::npos);

  // A flat call with a million arguments, and an index list as long.
  std::string call = "Y[i] = max(X[i]";
  while (call.size() < kTenMegabytes) call += ", X[i]";
  EXPECT_NE(timed_load(header + call + ")\n").first_error().find("'max' takes 2 arguments"),
            std::string::npos);
  std::string access = "Y[i] = X[i";
  while (access.size() < kTenMegabytes) access += ", i";
  EXPECT_NE(timed_load(header + access + "]\n").first_error().find("'X' has rank 1 but is indexed"),
            std::string::npos);

  // One long name and one long number.
  timed_load(header + "Y[i] = X[i] * " + std::string(kTenMegabytes, 'n') + "\n");
  timed_load(header + "Y[i] = X[i] * " + std::string(kTenMegabytes, '7') + "\n");
}

TEST(Robustness, HundredsOfThousandsOfStatements) {
  const int kStatements = 200000;
  // A valid chain T1 = T0 + 1, T2 = T1 + 1, ...: checked and printed in linear time.
  std::string chain = "input T0[4] : f32\n";
  for (int k = 1; k <= kStatements; ++k) {
    chain += "T" + std::to_string(k) + "[i] = T" + std::to_string(k - 1) + "[i] + 1\n";
  }
  Loaded valid = timed_load(chain);
  ASSERT_TRUE(valid.spec) << valid.first_error();
  EXPECT_EQ(valid.spec->tensors.size(), static_cast<size_t>(kStatements + 1));

  // Every statement reads an unknown tensor: each error lists a few known names, not all.
  std::string unknown = chain;
  for (int k = 0; k < kStatements; ++k) unknown += "U" + std::to_string(k) + "[i] = V[i]\n";
  Loaded invalid = timed_load(unknown);
  EXPECT_NE(invalid.first_error().find("unknown tensor 'V'; known tensors are T0, T1, T2, "),
            std::string::npos);
  EXPECT_NE(invalid.first_error().find(", T18, T19, ..."), std::string::npos);

  // One reduction binding a variable many times.
  std::string reduction = "input X[4] : f32\nY[i] = sum(a0";
  for (int k = 1; k < kStatements; ++k) reduction += ", a" + std::to_string(k);
  for (int k = 0; k < kStatements; ++k) reduction += ", a" + std::to_string(kStatements - 1);
  timed_load(reduction + ") X[i]\n");
}

TEST(Robustness, HundredThousandLevelsOfNesting) {
  const int kLevels = 100000;
  std::string header = "input X[4] : f32\nY[i] = ";
  const std::string too_deep = "error: expression nested too deeply (more than 200 levels)";
  auto first_error_of = [&](const std::string& body) {
    return timed_load(header + body + "\n").first_error();
  };
  auto repeat = [](const std::string& piece, int count) {
    std::string text;
    for (int k = 0; k < count; ++k) text += piece;
    return text;
  };
  EXPECT_NE(first_error_of(std::string(kLevels, '(') + "X[i]" + std::string(kLevels, ')'))
                .find(too_deep), std::string::npos);
  EXPECT_NE(first_error_of(std::string(kLevels, '(')).find(too_deep), std::string::npos);
  EXPECT_NE(first_error_of(std::string(kLevels, '-') + "X[i]").find(too_deep), std::string::npos);
  EXPECT_NE(first_error_of(repeat("exp(", kLevels)).find(too_deep), std::string::npos);
  EXPECT_NE(first_error_of(repeat("sum(a) ", kLevels) + "X[i]").find(too_deep), std::string::npos);
  EXPECT_NE(first_error_of(repeat("select(i < 1, ", kLevels)).find(too_deep), std::string::npos);
  EXPECT_NE(first_error_of("X[" + repeat("(", kLevels) + "i").find(too_deep), std::string::npos);
  EXPECT_NE(first_error_of("X[" + repeat("-", kLevels) + "i]").find(too_deep), std::string::npos);
  EXPECT_NE(first_error_of("select(" + repeat("(", kLevels)).find(too_deep), std::string::npos);
}

// Edits that tend to reach unusual states: tokens of the language, numbers at the limits, and
// raw bytes.
const char* const kFragments[] = {
    "(", ")", "[", "]", ",", ":", "=", "+", "-", "*", "/", "%", "<", "<=", "==", "!=", " and ",
    " or ", "sum(n) ", "max(", "min(a, b)", "select(", "exp(", "inf", "0", "1", "-1", "1.5",
    "1e999", "99999999999999999999", "9223372036854775807", "\n", "#", "output ", "input ",
    "let ", "bf16", "f64", "Q", "K", "m", "n", "d", "D", " ", "\t", "\xff", "@", "\r\n"};

std::string mutate(const std::string& text, SplitMix64& rng) {
  std::string out = text;
  int edits = 1 + static_cast<int>(rng.next() % 3);
  for (int e = 0; e < edits && !out.empty(); ++e) {
    size_t at = rng.next() % out.size();
    switch (rng.next() % 5) {
      case 0: out.erase(at, 1 + rng.next() % 8); break;
      case 1: out.insert(at, kFragments[rng.next() % std::size(kFragments)]); break;
      case 2: out[at] = static_cast<char>(rng.next() & 0xff); break;
      case 3: {  // duplicate a chunk somewhere else
        std::string chunk = out.substr(at, 1 + rng.next() % 24);
        out.insert(rng.next() % out.size(), chunk);
        break;
      }
      case 4: {  // swap two chunks
        size_t other = rng.next() % out.size();
        std::swap(out[at], out[other]);
        break;
      }
    }
  }
  return out;
}

TEST(Robustness, RandomMutationsOfTheAssetSpecs) {
  std::vector<std::string> sources;
  for (const auto& entry :
       std::filesystem::directory_iterator(nautilus::testing::source_path("assets/specs"))) {
    if (entry.path().extension() == ".nt") {
      sources.push_back(nautilus::testing::read_text(entry.path().string()));
    }
  }
  ASSERT_FALSE(sources.empty());
  std::sort(sources.begin(), sources.end());
  SplitMix64 rng(7);
  int succeeded = 0, failed = 0;
  for (int k = 0; k < 4000; ++k) {
    std::string text = mutate(sources[k % sources.size()], rng);
    Loaded loaded = load_text(text);
    expect_consistent(loaded);
    (loaded.spec ? succeeded : failed) += 1;
    if (::testing::Test::HasFailure()) {
      ADD_FAILURE() << "mutation " << k << ":\n" << text;
      return;
    }
  }
  // Both outcomes occur, so the mutations exercise the checker as well as the parser.
  EXPECT_GT(succeeded, 100);
  EXPECT_GT(failed, 1000);
}

}  // namespace
}  // namespace nautilus::spec

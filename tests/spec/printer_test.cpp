// Tests of the spec printers: minimal parentheses, number spelling, a print/parse round trip
// over every spec, and golden files of the text, DOT and JSON forms.
#include "core/spec/printer.h"

#include <filesystem>
#include <gtest/gtest.h>

#include "core/spec/parser.h"
#include "tests/spec/spec_test_support.h"

namespace nautilus::spec {
namespace {

using testing::load_source_file;
using testing::load_text;
using testing::Loaded;
using testing::sexpr;

// Parses `Y[i] = <value>` and prints the value back.
std::string reprint(const std::string& value) {
  auto file = std::make_shared<SourceFile>("test.nt", "Y[i] = " + value + "\n");
  DiagnosticEngine diagnostics(file);
  Program program = parse_program(file, diagnostics);
  EXPECT_FALSE(diagnostics.has_errors()) << value;
  if (program.statements.size() != 1) return "<parse error>";
  return print_expr(*program.statements[0].value);
}

TEST(Printer, ParenthesesOnlyWhereNeeded) {
  EXPECT_EQ(reprint("(a - b) - c"), "a - b - c");
  EXPECT_EQ(reprint("a - (b - c)"), "a - (b - c)");
  EXPECT_EQ(reprint("a + (b + c)"), "a + (b + c)");  // keeps the tree: float + is not associative
  EXPECT_EQ(reprint("(a * b) + c"), "a * b + c");
  EXPECT_EQ(reprint("(a + b) * c"), "(a + b) * c");
  EXPECT_EQ(reprint("a / (b * c)"), "a / (b * c)");
  EXPECT_EQ(reprint("((x))"), "x");
  EXPECT_EQ(reprint("-(a + b)"), "-(a + b)");
  EXPECT_EQ(reprint("-a * b"), "-a * b");
  EXPECT_EQ(reprint("--a"), "-(-a)");
  EXPECT_EQ(reprint("a - -b"), "a - -b");
}

TEST(Printer, ReductionsAreParenthesizedWhenSomethingFollows) {
  EXPECT_EQ(reprint("(sum(n) x) * y"), "(sum(n) x) * y");
  EXPECT_EQ(reprint("a * sum(n) x * y"), "a * sum(n) x * y");
  EXPECT_EQ(reprint("a * (sum(n) x) + b"), "a * (sum(n) x) + b");
  EXPECT_EQ(reprint("(-sum(n) x) + 1"), "-(sum(n) x) + 1");
  EXPECT_EQ(reprint("exp(sum(n) x) + max(a, b)"), "exp(sum(n) x) + max(a, b)");
  EXPECT_EQ(reprint("sum(n) max(m) X[n, m]"), "sum(n) max(m) X[n, m]");
  EXPECT_EQ(reprint("select(n <= m, sum(d) x, -inf)"), "select(n <= m, sum(d) x, -inf)");
}

TEST(Printer, IndicesAndConditions) {
  EXPECT_EQ(reprint("X[(h + 1) / 4, -(i - 1), i - (j - 1), 2 * (i + j), (i * 2) % N]"),
            "X[(h + 1) / 4, -(i - 1), i - (j - 1), 2 * (i + j), i * 2 % N]");
  EXPECT_EQ(reprint("select(a < b or c >= d and e != f, 1, 0)"),
            "select(a < b or c >= d and e != f, 1, 0)");
}

TEST(Printer, Numbers) {
  EXPECT_EQ(reprint("0.5 + 0.00001 + 100 + 1.5e20 + 2.0 + inf"),
            "0.5 + 1e-05 + 100 + 1.5e+20 + 2 + inf");
}

// The specs to check: the shipped assets and this folder's own data.
std::vector<std::string> spec_files() {
  std::vector<std::string> files;
  for (const char* folder : {"assets/specs", "tests/spec/data"}) {
    for (const auto& entry :
         std::filesystem::directory_iterator(nautilus::testing::source_path(folder))) {
      if (entry.path().extension() == ".nt") {
        files.push_back(std::string(folder) + "/" + entry.path().filename().string());
      }
    }
  }
  std::sort(files.begin(), files.end());
  return files;
}

// A checked spec written back as `.nt` source, with everything sema inferred made explicit.
std::string to_source(const Spec& spec) {
  std::string text;
  for (size_t i = 0; i < spec.sizes.size(); ++i) {
    text += (i == 0 ? "let " : ", ") + spec.sizes[i].first + " = " +
            std::to_string(spec.sizes[i].second);
  }
  text += "\n";
  for (const Tensor& tensor : spec.tensors) {
    const Statement& statement = spec.statement(tensor.statement);
    std::string dims;
    for (const std::string& name : tensor.dim_names) dims += (dims.empty() ? "" : ", ") + name;
    if (tensor.role == TensorRole::Input) {
      text += "input " + tensor.name + "[" + dims + "] : " + dtype_name(tensor.dtype) + "\n";
      continue;
    }
    text += std::string(tensor.role == TensorRole::Output ? "output " : "") + tensor.name + "[" +
            dims + "] : " + dtype_name(tensor.dtype) + " = " + print_expr(*statement.value) +
            "\n";
  }
  return text;
}

TEST(Printer, EverySpecRoundTrips) {
  for (const std::string& path : spec_files()) {
    SCOPED_TRACE(path);
    Loaded original = load_source_file(path);
    ASSERT_TRUE(original.spec) << original.first_error();
    std::string source = to_source(*original.spec);
    Loaded reloaded = load_text(source);
    ASSERT_TRUE(reloaded.spec) << reloaded.first_error() << "\n" << source;
    ASSERT_EQ(reloaded.spec->definitions.size(), original.spec->definitions.size());
    for (size_t i = 0; i < original.spec->definitions.size(); ++i) {
      const Statement& a = original.spec->statement(original.spec->definitions[i]);
      const Statement& b = reloaded.spec->statement(reloaded.spec->definitions[i]);
      EXPECT_EQ(sexpr(*a.value), sexpr(*b.value));
    }
    EXPECT_EQ(to_source(*reloaded.spec), source);
  }
}

TEST(Printer, Golden) {
  for (const std::string& path : spec_files()) {
    SCOPED_TRACE(path);
    Loaded loaded = load_source_file(path);
    ASSERT_TRUE(loaded.spec) << loaded.first_error();
    std::string stem = std::filesystem::path(path).stem().string();
    nautilus::testing::expect_golden("spec/" + stem + ".txt", print_spec(*loaded.spec));
    nautilus::testing::expect_golden("spec/" + stem + ".dot", spec_to_dot(*loaded.spec));
    nautilus::testing::expect_golden("spec/" + stem + ".json",
                                     spec_to_json(*loaded.spec).dump(2) + "\n");
  }
}

TEST(Printer, DotNodesAndEdges) {
  Loaded loaded = load_text("input X[4] : bf16\nT[i] = X[i] * X[i]\noutput Y[i] = T[i] + X[i]\n",
                            {}, "small.nt");
  ASSERT_TRUE(loaded.spec) << loaded.first_error();
  std::string dot = spec_to_dot(*loaded.spec);
  EXPECT_EQ(dot.rfind("digraph spec {\n", 0), 0u);
  EXPECT_NE(dot.find("\"tensor:X\" [shape=box, style=filled"), std::string::npos);
  EXPECT_NE(dot.find("\"tensor:T\" [shape=box, style=dashed"), std::string::npos);
  EXPECT_NE(dot.find("\"tensor:Y\" [shape=box, style=\"filled,bold\""), std::string::npos);
  // One edge per tensor read, however often it is read.
  EXPECT_NE(dot.find("\"tensor:X\" -> \"stmt:T\";\n  \"stmt:T\" -> \"tensor:T\";"),
            std::string::npos);
  EXPECT_NE(dot.find("\"tensor:T\" -> \"stmt:Y\";\n  \"tensor:X\" -> \"stmt:Y\";"),
            std::string::npos);
}

}  // namespace
}  // namespace nautilus::spec

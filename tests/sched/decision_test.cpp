// Decisions as text and JSON, the registry, and applying by name.
#include "core/sched/decision.h"

#include <filesystem>
#include <fstream>

#include <gtest/gtest.h>

#include "tests/common/golden.h"
#include "tests/sched/sched_test_util.h"

namespace nautilus::sched {
namespace {

Decision parse_ok(const std::string& text) {
  DecisionParseError error;
  std::optional<Decision> decision = parse_decision(text, &error);
  EXPECT_TRUE(decision) << text << ": " << to_string(error);
  return decision.value_or(Decision{});
}

TEST(DecisionText, CanonicalFormsRoundTrip) {
  for (const char* text : {
           "tile(O, m=128, n=64)",
           "split(C_sum, m, 64)",
           "reorder(C_sum, k, n, m)",
           "bind(O, b=grid.z, h=grid.y, m_o=grid.x)",
           "inline(P)",
           "compute_at(S, O_sum, m_o)",
           "reverse_compute_at(O, O_sum, m_o)",
           "rolling_update(O, n)",
           "place(K, shared, stages=2)",
           "mma(O, wgmma.m64n128k16)",
           "layout(Ks, SW128)",
           "warp_spec(producer=1, consumers=2)",
           "regularize()",
           "split(C, m, -4)",
           "split(C, m, 9223372036854775807)",
           "split(C, m, -9223372036854775808)",
       }) {
    const Decision decision = parse_ok(text);
    EXPECT_EQ(print_decision(decision), text);
    EXPECT_EQ(parse_ok(print_decision(decision)), decision) << text;
  }
}

TEST(DecisionText, FieldsAndTarget) {
  const Decision tile = parse_ok("tile(O_sum, m=64, n=32)");
  EXPECT_EQ(tile.kind, "tile");
  EXPECT_EQ(tile.target, "O_sum");
  ASSERT_EQ(tile.args.size(), 2u);
  EXPECT_EQ(tile.args[0], (DecisionArg{"m", int64_t{64}}));
  ASSERT_NE(tile.find("n"), nullptr);
  EXPECT_EQ(tile.find("n")->as_int(), 32);
  EXPECT_EQ(tile.find("k"), nullptr);
  EXPECT_TRUE(tile.positional().empty());

  const Decision split = parse_ok("split(C_sum, m, 64)");
  ASSERT_EQ(split.positional().size(), 2u);
  EXPECT_EQ(split.positional()[0]->as_name(), "m");
  EXPECT_EQ(split.positional()[1]->as_int(), 64);

  const Decision bind = parse_ok("bind(O, m_o=grid.x)");
  EXPECT_EQ(bind.find("m_o")->as_name(), "grid.x");

  // Only a leading plain name is the target: an integer or a dotted name is an argument.
  EXPECT_EQ(parse_ok("warp_spec(producer=1)").target, "");
  EXPECT_EQ(parse_ok("f(4, x)").target, "");
  EXPECT_EQ(parse_ok("f(4, x)").args.size(), 2u);
  EXPECT_EQ(parse_ok("f(a.b, x)").target, "");
}

TEST(DecisionText, WhitespaceIsFree) {
  EXPECT_EQ(print_decision(parse_ok("  tile ( O ,m = 128,\tn=64 )  ")), "tile(O, m=128, n=64)");
  EXPECT_EQ(print_decision(parse_ok("inline(\n  P\n)")), "inline(P)");
  EXPECT_EQ(print_decision(parse_ok("regularize( )")), "regularize()");
}

struct Malformed {
  const char* text;
  size_t column;
  const char* message;
};

TEST(DecisionText, MalformedTextReportsColumnAndExpectation) {
  for (const Malformed& c : std::initializer_list<Malformed>{
           {"", 1, "expected a decision name such as tile"},
           {"   ", 4, "expected a decision name such as tile"},
           {"(O)", 1, "expected a decision name such as tile"},
           {"7tile(O)", 1, "expected a decision name such as tile"},
           {"tile", 5, "expected '(' after 'tile'"},
           {"tile O", 6, "expected '(' after 'tile'"},
           {"tile(O, m=128", 14, "expected ')'"},
           {"tile(O, m=128 n=64)", 15, "expected ',' or ')'"},
           {"tile(O, m=)", 11, "expected a value after 'm='"},
           {"tile(O, m=128,)", 15, "expected an argument (a name, an integer or name=value)"},
           {"tile(, m=1)", 6, "expected an argument (a name, an integer or name=value)"},
           {"tile(O, m=1, 4)", 14, "positional argument after keyword arguments"},
           {"tile(O, m=1, m=2)", 14, "keyword argument 'm' is given twice"},
           {"bind(O, m_o=grid.)", 18, "expected a name after '.'"},
           {"bind(O, grid.x=m)", 9, "a keyword is a plain name, not 'grid.x'"},
           {"split(C, m, 12abc)", 15, "expected ',' or ')' after the integer"},
           {"split(C, m, -)", 14, "expected digits after '-'"},
           {"split(C, m, 99999999999999999999)", 13,
            "integer 99999999999999999999 is out of range"},
           {"inline(P) extra", 11, "unexpected text after ')'"},
           {"inline(P))", 10, "unexpected text after ')'"},
           {"tile(O; m=4)", 7, "expected ',' or ')'"},
           {"tile(O, m=4", 12, "expected ')'"},
       }) {
    DecisionParseError error;
    EXPECT_FALSE(parse_decision(c.text, &error)) << c.text;
    EXPECT_EQ(error.column, c.column) << c.text;
    EXPECT_EQ(error.message, c.message) << c.text;
  }
}

TEST(DecisionText, ErrorRendersWithColumn) {
  DecisionParseError error;
  EXPECT_FALSE(parse_decision("tile(O, m=128", &error));
  EXPECT_EQ(to_string(error), "expected ')' at column 14");
}

TEST(ScheduleJson, RoundTripKeepsOrderAndText) {
  Schedule schedule;
  for (const char* text : {"tile(O_sum, m=64, n=32)", "inline(P)", "compute_at(S, O_sum, m_o)",
                           "bind(O_sum, b=grid.z, h=grid.y, m_o=grid.x)"}) {
    schedule.decisions.push_back(parse_ok(text));
  }
  const nlohmann::ordered_json json = schedule_to_json(schedule);
  EXPECT_EQ(json.dump(),
            "{\"decisions\":[\"tile(O_sum, m=64, n=32)\",\"inline(P)\","
            "\"compute_at(S, O_sum, m_o)\",\"bind(O_sum, b=grid.z, h=grid.y, m_o=grid.x)\"]}");
  std::string error;
  std::optional<Schedule> back = schedule_from_json(nlohmann::json::parse(json.dump()), &error);
  ASSERT_TRUE(back) << error;
  EXPECT_EQ(back->decisions, schedule.decisions);

  std::optional<Schedule> empty = schedule_from_json(schedule_to_json(Schedule{}), &error);
  ASSERT_TRUE(empty) << error;
  EXPECT_TRUE(empty->decisions.empty());
}

TEST(ScheduleJson, ErrorsNameTheEntryAndColumn) {
  struct Case {
    const char* json;
    const char* error;
  };
  for (const Case& c : std::initializer_list<Case>{
           {"[]", "a schedule is a JSON object {\"decisions\": [...]}"},
           {"{}", "the schedule has no \"decisions\" array"},
           {"{\"decisions\": \"inline(P)\"}", "the schedule has no \"decisions\" array"},
           {"{\"decisions\": [], \"pins\": []}", "unknown key \"pins\" in the schedule"},
           {"{\"decisions\": [\"inline(P)\", 3]}", "decisions[1] is not a string"},
           {"{\"decisions\": [\"inline(P)\", \"tile(O, m=128\"]}",
            "decisions[1] \"tile(O, m=128\": expected ')' at column 14"},
       }) {
    std::string error;
    EXPECT_FALSE(schedule_from_json(nlohmann::json::parse(c.json), &error)) << c.json;
    EXPECT_EQ(error, c.error) << c.json;
  }
}

TEST(ScheduleJson, ReadsFiles) {
  const std::filesystem::path dir = std::filesystem::temp_directory_path() / "nautilus_sched_test";
  std::filesystem::create_directories(dir);
  const std::string good = (dir / "good.json").string();
  std::ofstream(good) << "{\n  \"decisions\": [\n    \"tile(C_sum, m=4)\",\n"
                         "    \"inline(P)\"\n  ]\n}\n";
  std::string error;
  std::optional<Schedule> schedule = read_schedule_file(good, &error);
  ASSERT_TRUE(schedule) << error;
  ASSERT_EQ(schedule->decisions.size(), 2u);
  EXPECT_EQ(print_decision(schedule->decisions[0]), "tile(C_sum, m=4)");

  const std::string bad_json = (dir / "bad.json").string();
  std::ofstream(bad_json) << "{\"decisions\": [";
  EXPECT_FALSE(read_schedule_file(bad_json, &error));
  EXPECT_EQ(error.rfind(bad_json + ": not valid JSON: ", 0), 0u) << error;

  const std::string bad_entry = (dir / "bad_entry.json").string();
  std::ofstream(bad_entry) << "{\"decisions\": [\"tile(C_sum m=4)\"]}";
  EXPECT_FALSE(read_schedule_file(bad_entry, &error));
  EXPECT_EQ(error, bad_entry + ": decisions[0] \"tile(C_sum m=4)\": expected ',' or ')' at "
                               "column 12");

  EXPECT_FALSE(read_schedule_file((dir / "missing.json").string(), &error));
  EXPECT_NE(error.find("missing.json"), std::string::npos) << error;
  std::filesystem::remove_all(dir);
}

TEST(Registry, EveryKindDescribesItself) {
  const std::vector<DecisionKind>& registry = decision_registry();
  ASSERT_GE(registry.size(), 7u);
  for (size_t i = 0; i < registry.size(); ++i) {
    const DecisionKind& kind = registry[i];
    EXPECT_EQ(kind.signature.rfind(kind.name + "(", 0), 0u) << kind.name;
    EXPECT_FALSE(kind.summary.empty()) << kind.name;
    EXPECT_EQ(kind.summary.back(), '.') << kind.name;
    EXPECT_NE(kind.description.find("Example"), std::string::npos) << kind.name;
    EXPECT_TRUE(kind.apply) << kind.name;
    EXPECT_EQ(find_decision_kind(kind.name), &kind);
    for (size_t j = 0; j < i; ++j) EXPECT_NE(registry[j].name, kind.name);
  }
  for (const char* name : {"tile", "split", "reorder", "bind", "inline", "compute_at",
                           "reverse_compute_at"}) {
    EXPECT_NE(find_decision_kind(name), nullptr) << name;
  }
  EXPECT_EQ(find_decision_kind("tiel"), nullptr);
}

TEST(Registry, DocsDescribeEveryKind) {
  const std::string docs = testing::read_text(testing::source_path("docs/schedules.md"));
  for (const DecisionKind& kind : decision_registry()) {
    EXPECT_NE(docs.find("`" + kind.signature + "`"), std::string::npos)
        << "docs/schedules.md does not show the signature of " << kind.name;
  }
}

class Apply : public ::testing::Test {
 protected:
  void SetUp() override { gemm_ = testing::lower_asset("gemm", {"M=12", "N=10", "K=24"}); }
  testing::LoweredAsset gemm_;
};

TEST_F(Apply, UnknownKindListsTheKnownOnes) {
  const ApplyResult result = apply_decision(gemm_.program, parse_ok("tiel(C_sum, m=4)"));
  ASSERT_FALSE(result.ok());
  std::string known;
  for (const DecisionKind& kind : decision_registry()) {
    known += (known.empty() ? "" : ", ") + kind.name;
  }
  EXPECT_EQ(result.reason, "unknown decision 'tiel'; known decisions: " + known);
  EXPECT_EQ(result.reason.rfind("unknown decision 'tiel'; known decisions: tile, split, reorder, "
                                "bind, inline, compute_at, compute_with, factor, reverse_compute_at", 0),
            0u);
}

TEST_F(Apply, NoProgramIsAReason) {
  EXPECT_EQ(apply_decision(nullptr, parse_ok("inline(P)")).reason,
            "there is no program to schedule");
}

TEST_F(Apply, ArgumentShapesAreCheckedAgainstTheSignature) {
  struct Case {
    const char* decision;
    const char* reason;
  };
  for (const Case& c : std::initializer_list<Case>{
           {"split(C_sum, m)",
            "split(BLOCK, AXIS, FACTOR): takes 2 positional arguments after the target, got 1"},
           {"split(C_sum, m, n)", "split(BLOCK, AXIS, FACTOR): FACTOR is an integer, got n"},
           {"split(C_sum, 4, 4)", "split(BLOCK, AXIS, FACTOR): AXIS is a name, got 4"},
           {"split(4, m, 4)",
            "split(BLOCK, AXIS, FACTOR): the first argument names the target"},
           {"split(C_sum, m, 4, f=1)",
            "split(BLOCK, AXIS, FACTOR): takes no keyword arguments, got f="},
           {"tile(C_sum)", "tile(BLOCK, AXIS=SIZE, ...): needs at least one keyword argument"},
           {"tile(C_sum, m, n=4)",
            "tile(BLOCK, AXIS=SIZE, ...): takes 0 positional arguments after the target, got 1"},
           {"tile(C_sum, m=big)", "tile(BLOCK, AXIS=SIZE, ...): SIZE is an integer, got m=big"},
           {"reorder(C_sum)",
            "reorder(BLOCK, LOOP, LOOP, ...): takes at least 1 positional argument after the "
            "target, got 0"},
           {"reorder(C_sum, m, 2)", "reorder(BLOCK, LOOP, LOOP, ...): LOOP is a name, got 2"},
           {"bind(C_sum, m=grid.w)",
            "bind(BLOCK, LOOP=grid.x|grid.y|grid.z|serial, ...): loop m cannot be bound to "
            "grid.w; the choices are grid.x, grid.y, grid.z and serial"},
           {"bind(C_sum, m=1)",
            "bind(BLOCK, LOOP=grid.x|grid.y|grid.z|serial, ...): loop m cannot be bound to 1; the "
            "choices are grid.x, grid.y, grid.z and serial"},
           {"inline(C_sum, m)", "inline(TENSOR): takes 0 positional arguments after the target, "
                                "got 1"},
           {"inline()", "inline(TENSOR): the first argument names the target"},
           {"compute_at(C_sum, C)",
            "compute_at(PRODUCER, CONSUMER, LOOP): takes 2 positional arguments after the target, "
            "got 1"},
           {"compute_at(C_sum, C, 1)",
            "compute_at(PRODUCER, CONSUMER, LOOP): CONSUMER and LOOP are names, got 1"},
           {"reverse_compute_at(C, C_sum, 1)",
            "reverse_compute_at(CONSUMER, PRODUCER, LOOP): PRODUCER and LOOP are names, got 1"},
       }) {
    EXPECT_EQ(testing::failure_reason(gemm_.program, c.decision), c.reason) << c.decision;
  }
}

TEST_F(Apply, ScheduleAppliesInOrderAndNamesTheFailingDecision) {
  Schedule schedule;
  schedule.decisions = {parse_ok("tile(C_sum, m=4, n=5)"), parse_ok("bind(C_sum, m_o=grid.x)")};
  ApplyResult result = apply_schedule(gemm_.program, schedule);
  ASSERT_TRUE(result.ok()) << result.reason;
  testing::expect_same_results(gemm_, result.program);

  schedule.decisions.push_back(parse_ok("tile(C, q=4)"));
  result = apply_schedule(gemm_.program, schedule);
  ASSERT_FALSE(result.ok());
  EXPECT_EQ(result.reason,
            "decision 3 tile(C, q=4): block C has no axis or loop q; its axes are m, n and its "
            "loops m, n");
  EXPECT_TRUE(apply_schedule(gemm_.program, Schedule{}).program == gemm_.program);
}

}  // namespace
}  // namespace nautilus::sched

// The `nautilus` command line, run in-process (run_cli) and as the real executable.
#include <sys/wait.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <sstream>

#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include "app/cli/cli.h"
#include "core/scalar/visitor.h"
#include "tests/common/golden.h"
#include "tests/common/spec_test_util.h"

namespace nautilus {
namespace {

using testing::source_path;

struct CliRun {
  int status = -1;
  std::string out;
  std::string err;
};

CliRun run(std::vector<std::string> args, const cli::CliHooks& hooks = {}) {
  std::ostringstream out, err;
  CliRun result;
  result.status = cli::run_cli(args, out, err, hooks);
  result.out = out.str();
  result.err = err.str();
  return result;
}

std::vector<std::string> with_sizes(std::vector<std::string> args, const std::string& asset) {
  for (const std::string& size : testing::small_sizes(asset)) {
    args.push_back("-D");
    args.push_back(size);
  }
  return args;
}

std::string asset(const std::string& name) { return source_path("assets/specs/" + name + ".nt"); }

class EveryAssetCli : public ::testing::TestWithParam<std::string> {};

TEST_P(EveryAssetCli, CheckLowerAndEvalSucceed) {
  const std::string name = GetParam();
  CliRun check = run({"check", asset(name)});
  EXPECT_EQ(check.status, 0) << check.err;
  EXPECT_NE(check.out.find(": ok:"), std::string::npos);

  for (std::string stage : {"spec", "scalar", "vrtile"}) {
    CliRun text = run({"lower", asset(name), "--stage", stage});
    EXPECT_EQ(text.status, 0) << text.err;
    EXPECT_FALSE(text.out.empty());
    CliRun dot = run({"lower", asset(name), "--stage", stage, "--format", "dot"});
    EXPECT_EQ(dot.status, 0) << dot.err;
    EXPECT_EQ(dot.out.rfind("digraph", 0), 0u) << dot.out.substr(0, 40);
    CliRun json = run({"lower", asset(name), "--stage", stage, "--format=json"});
    EXPECT_EQ(json.status, 0) << json.err;
    EXPECT_TRUE(nlohmann::json::accept(json.out)) << stage;
  }

  for (std::string stage : {"scalar", "vrtile"}) {
    CliRun eval = run(with_sizes({"eval", asset(name), "--stage", stage, "--seed", "3"}, name));
    EXPECT_EQ(eval.status, 0) << eval.out << eval.err;
    EXPECT_NE(eval.out.find("max relative error"), std::string::npos);
    EXPECT_NE(eval.out.find("PASS"), std::string::npos);
  }
  const std::string schedule = source_path("assets/schedules/" + name + ".json");
  CliRun scheduled = run(with_sizes(
      {"eval", asset(name), "--schedule", schedule, "--stage", "vrtile", "--seed", "4"}, name));
  EXPECT_EQ(scheduled.status, 0) << scheduled.out << scheduled.err;
  EXPECT_NE(scheduled.out.find("PASS"), std::string::npos);
}

INSTANTIATE_TEST_SUITE_P(Assets, EveryAssetCli, ::testing::ValuesIn(testing::asset_names()),
                         [](const auto& test_info) { return test_info.param; });

// LayerNorm's one-pass statistics with only the statistics nest bound (the completion the search
// gives a node after rolling_update): the hoisted reduction of a constant is a scalar in the
// reduce's sliced layout, added to a loop-carried scalar in the uniform layout. The MA lowering
// used to emit that add with mismatched layouts, the module failed verification, and the search
// pruned every one-pass LayerNorm as "the tiles cannot be placed".
// `schedule` ends with the register check and the pipeline solver: one line per pipelined
// kernel and its decision in the written schedule; --no-pipeline-solver keeps the search's
// stages, --no-register-check skips the check; a bad --solver-time is refused before the search
// runs.
TEST(Cli, ScheduleCompletesThePipelineWithTheSolver) {
  const std::string dir = ::testing::TempDir();
  const std::vector<std::string> sizes = {"-D", "M=512", "-D", "N=512", "-D", "K=512", "--ignore-db"};
  std::vector<std::string> args = {"schedule", asset("gemm")};
  args.insert(args.end(), sizes.begin(), sizes.end());
  std::vector<std::string> solved = args;
  solved.insert(solved.end(), {"-o", dir + "/solved.json"});
  const CliRun with = run(solved);
  ASSERT_EQ(with.status, 0) << with.out << with.err;
  EXPECT_NE(with.out.find("pipeline: kernel C (sm_90a roles): optimal"), std::string::npos) << with.out;
  // The register check compiled the pick with NVRTC first (where NVRTC is installed).
  EXPECT_NE(with.out.find("register check: "), std::string::npos) << with.out;
  std::stringstream written;
  written << std::ifstream(dir + "/solved.json").rdbuf();
  EXPECT_NE(written.str().find("pipeline(C_sum, stages="), std::string::npos) << written.str();

  std::vector<std::string> kept = args;
  kept.insert(kept.end(), {"--no-pipeline-solver", "--no-register-check", "-o", dir + "/kept.json"});
  const CliRun without = run(kept);
  ASSERT_EQ(without.status, 0) << without.out << without.err;
  EXPECT_EQ(without.out.find("pipeline: kernel"), std::string::npos) << without.out;
  EXPECT_EQ(without.out.find("register check"), std::string::npos) << without.out;
  std::stringstream search_only;
  search_only << std::ifstream(dir + "/kept.json").rdbuf();
  EXPECT_EQ(search_only.str().find("pipeline("), std::string::npos) << search_only.str();

  std::vector<std::string> bad = args;
  bad.insert(bad.end(), {"--solver-time", "soon"});
  const CliRun refused = run(bad);
  EXPECT_EQ(refused.status, 1);
  EXPECT_NE(refused.err.find("--solver-time expects seconds"), std::string::npos) << refused.err;
  EXPECT_EQ(refused.out.find("search:"), std::string::npos) << "refused before searching";
}

TEST(Cli, LayerNormOnePassStatisticsLowerToVerifiedMaTileIr) {
  const std::string schedule =
      (std::filesystem::temp_directory_path() / "layernorm_one_pass.json").string();
  std::ofstream(schedule) << R"json({"decisions": ["rolling_update(Var_sum, h, tile=1024)",
    "bind(Var_sum_acc3, t=grid.x)", "tile(Y, t=64, h=64)", "bind(Y, t_o=grid.y, h_o=grid.x)"]})json";
  CliRun eval = run({"eval", asset("layernorm"), "-D", "T=16", "-D", "H=4096", "--schedule",
                     schedule, "--stage", "matile", "--seed", "5"});
  EXPECT_EQ(eval.status, 0) << eval.out << eval.err;
  EXPECT_NE(eval.out.find("PASS"), std::string::npos) << eval.out << eval.err;
}

TEST(Cli, LowerAllPrintsEveryStageWithBanners) {
  CliRun lower = run({"lower", asset("attention")});
  ASSERT_EQ(lower.status, 0) << lower.err;
  EXPECT_NE(lower.out.find("# ===== stage spec ====="), std::string::npos);
  EXPECT_NE(lower.out.find("# ===== stage scalar ====="), std::string::npos);
  EXPECT_NE(lower.out.find("# ===== stage vrtile ====="), std::string::npos);
  EXPECT_LT(lower.out.find("stage spec"), lower.out.find("stage scalar"));
  EXPECT_LT(lower.out.find("stage scalar"), lower.out.find("stage vrtile"));
  EXPECT_NE(lower.out.find("# ===== stage matile ====="), std::string::npos);
  EXPECT_NE(lower.out.find("# ===== stage cuda ====="), std::string::npos);
  EXPECT_NE(lower.out.find("extern \"C\" __global__"), std::string::npos);
}

TEST(Cli, CudaStageIsSourceTextOrJson) {
  const std::string schedule = source_path("assets/schedules/gemm.json");
  CliRun text = run({"lower", asset("gemm"), "--schedule", schedule, "--stage", "cuda"});
  ASSERT_EQ(text.status, 0) << text.err;
  EXPECT_NE(text.out.find("mma.sync.aligned.m16n8k16"), std::string::npos);
  CliRun json = run({"lower", asset("gemm"), "--schedule", schedule, "--stage", "cuda",
                     "--format", "json"});
  ASSERT_EQ(json.status, 0) << json.err;
  const nlohmann::json document = nlohmann::json::parse(json.out);
  EXPECT_EQ(document["kernels"][0]["symbol"], "gemm_C");
  CliRun dot = run({"lower", asset("gemm"), "--stage", "cuda", "--format", "dot"});
  EXPECT_EQ(dot.status, 1);
  EXPECT_NE(dot.err.find("the cuda stage is source text"), std::string::npos) << dot.err;
}

TEST(Cli, SharedReadsGroupedReadsAWeightRowsBytesAtOnceAndCheckedAgainstTheReference) {
  // int8 weights stored [K, N] on 2 x 2 warps: grouped, and by default (auto: 4 atoms per warp,
  // 4 bytes per read), a lane reads a k row's 4 bytes of its 4 interleaved atoms at once;
  // `elements` reads them a byte at a time. All match the float64 reference in the MA
  // interpreter; an unknown mode is refused with the modes it takes.
  const std::vector<std::string> base = {"lower", asset("int8_weight_gemm"), "--stage", "cuda", "-D", "M=70",
                                         "-D", "N=80", "-D", "K=384", "-D", "KG=3",
                                         "--pin", "tile(Y_sum, m=64, n=64, k=128)",
                                         "--pin", "reverse_compute_at(Y, Y_sum, n_o)",
                                         "--pin", "bind(Y_sum, m_o=grid.y, n_o=grid.x)"};
  CliRun by_default = run(base);
  ASSERT_EQ(by_default.status, 0) << by_default.err;
  EXPECT_NE(by_default.out.find("ld_shared_u32((W_smem_addr"), std::string::npos);
  std::vector<std::string> elements_args = base;
  elements_args.insert(elements_args.end(), {"--shared-reads", "elements"});
  CliRun elements = run(elements_args);
  ASSERT_EQ(elements.status, 0) << elements.err;
  EXPECT_EQ(elements.out.find("ld_shared_u32((W_smem_addr"), std::string::npos);
  std::vector<std::string> grouped_args = base;
  grouped_args.insert(grouped_args.end(), {"--shared-reads", "grouped"});
  CliRun grouped = run(grouped_args);
  ASSERT_EQ(grouped.status, 0) << grouped.err;
  EXPECT_NE(grouped.out.find("ld_shared_u32((W_smem_addr"), std::string::npos);
  for (const char* mode : {"auto", "elements", "grouped"}) {
    CliRun checked = run({"eval", asset("int8_weight_gemm"), "--stage", "matile", "-D", "M=70", "-D", "N=80",
                          "-D", "K=384", "-D", "KG=3", "--pin", "tile(Y_sum, m=64, n=64, k=128)",
                          "--shared-reads", mode});
    EXPECT_EQ(checked.status, 0) << mode << ": " << checked.out << checked.err;
    EXPECT_NE(checked.out.find("PASS"), std::string::npos) << checked.out;
  }
  std::vector<std::string> bad = base;
  bad.insert(bad.end(), {"--shared-reads", "wide"});
  CliRun refused = run(bad);
  EXPECT_EQ(refused.status, 1);
  EXPECT_NE(refused.err.find("unknown --shared-reads 'wide'; expected auto, elements, grouped"), std::string::npos)
      << refused.err;
}

TEST(Cli, LowerEstimatePrintsTheCostModelAfterTheMatileStage) {
  const std::string gemm = source_path("assets/specs/gemm.nt");
  const std::string schedule = source_path("assets/schedules/gemm.json");
  const CliRun estimate = run({"lower", gemm, "--schedule", schedule, "--stage", "matile",
                               "--estimate", "h100", "-D", "M=512", "-D", "N=512", "-D", "K=512"});
  ASSERT_EQ(estimate.status, 0) << estimate.err;
  const size_t banner = estimate.out.find("# ===== estimate: NVIDIA H100");
  ASSERT_NE(banner, std::string::npos) << estimate.out;
  // One line for the kernel, with its time and what bounds it.
  EXPECT_NE(estimate.out.find("C: ", banner), std::string::npos) << estimate.out;
  EXPECT_NE(estimate.out.find(" us ", banner), std::string::npos) << estimate.out;

  const CliRun unknown = run({"lower", gemm, "--schedule", schedule, "--estimate", "sm_99"});
  EXPECT_EQ(unknown.status, 1);
  EXPECT_NE(unknown.err.find("no cost model for 'sm_99'; known: h100"), std::string::npos)
      << unknown.err;
  const CliRun too_early = run({"lower", gemm, "--stage", "scalar", "--estimate", "h100"});
  EXPECT_EQ(too_early.status, 1);
  EXPECT_NE(too_early.err.find("after the matile stage"), std::string::npos) << too_early.err;
}

TEST(Cli, PrintAfterAllShowsEveryPassWithTiming) {
  CliRun lower = run({"lower", asset("gemm"), "--print-after-all"});
  ASSERT_EQ(lower.status, 0) << lower.err;
  EXPECT_NE(lower.out.find("after pass parse-and-check, stage spec ("), std::string::npos);
  EXPECT_NE(lower.out.find("after pass lower-to-scalar, stage scalar ("), std::string::npos);
}

TEST(Cli, DiffAfterAllShowsWhatEveryPassChanged) {
  CliRun lower = run({"lower", asset("softmax"), "--pin", "tile(Y_sum, r=4)", "--stage", "scalar",
                      "--diff-after-all"});
  ASSERT_EQ(lower.status, 0) << lower.err;
  // One banner and one diff per pass: the first against nothing, each later one against the IR
  // before it.
  const size_t spec = lower.out.find("# ===== diff after pass parse-and-check, stage spec (");
  ASSERT_NE(spec, std::string::npos) << lower.out;
  EXPECT_NE(lower.out.find("--- before (nothing)\n+++ after parse-and-check\n@@ -0,0 +1,", spec),
            std::string::npos);
  const size_t lowered = lower.out.find("# ===== diff after pass lower-to-scalar, stage scalar (");
  ASSERT_NE(lowered, std::string::npos);
  EXPECT_NE(lower.out.find("--- before parse-and-check\n+++ after lower-to-scalar\n", lowered),
            std::string::npos);
  const size_t tiled = lower.out.find("# ===== diff after pass tile(Y_sum, r=4), stage scalar (");
  ASSERT_NE(tiled, std::string::npos) << lower.out;
  const std::string tile_diff = lower.out.substr(tiled);
  EXPECT_EQ(tile_diff.find("--- before lower-to-scalar\n+++ after tile(Y_sum, r=4)\n"),
            tile_diff.find('\n') + 1);
  // A diff shows changed lines only, with context: no pass section repeats the whole IR.
  EXPECT_NE(tile_diff.find("\n-"), std::string::npos);
  EXPECT_NE(tile_diff.find("\n+"), std::string::npos);
  CliRun full = run({"lower", asset("softmax"), "--pin", "tile(Y_sum, r=4)", "--stage", "scalar"});
  ASSERT_EQ(full.status, 0);
  EXPECT_LT(tile_diff.size(), full.out.size());

  CliRun both = run({"lower", asset("gemm"), "--diff-after-all", "--print-after-all"});
  EXPECT_EQ(both.status, 1);
  EXPECT_NE(both.err.find("exclude each other"), std::string::npos) << both.err;
  CliRun json = run({"lower", asset("gemm"), "--diff-after-all", "--format", "json"});
  EXPECT_EQ(json.status, 1);
  EXPECT_NE(json.err.find("--diff-after-all diffs the IR text"), std::string::npos) << json.err;
}

TEST(Cli, BadSpecGivesDiagnosticsAndExitOne) {
  std::string path = ::testing::TempDir() + "/bad.nt";
  std::ofstream(path) << "input A[M, K] : bf16\nC[m, n] = sum(k) A[m, k] * Bx[k, n]\n";
  CliRun check = run({"check", path, "-D", "M=4", "-D", "K=4"});
  EXPECT_EQ(check.status, 1);
  EXPECT_NE(check.err.find("bad.nt:2:28: error: unknown tensor 'Bx'"), std::string::npos)
      << check.err;
  EXPECT_NE(check.err.find("^"), std::string::npos);  // the caret under the column
}

TEST(Cli, UserErrorsAreOneClearLine) {
  struct Case {
    std::vector<std::string> args;
    std::string message;
  };
  std::vector<Case> cases = {
      {{"lower", "/nonexistent/x.nt"}, "nautilus: error: cannot open '/nonexistent/x.nt'"},
      {{"lower", asset("gemm"), "--stage", "ptx"}, "unknown stage 'ptx'; expected spec, scalar, vrtile, matile, cuda"},
      {{"lower", asset("gemm"), "--format", "svg"}, "unknown format 'svg'"},
      {{"lower", asset("gemm"), "--format", "dot"}, "--format dot shows one graph"},
      {{"lower", asset("gemm"), "--bogus"}, "unknown option '--bogus' for 'nautilus lower'"},
      {{"lower"}, "expects a spec file"},
      {{"eval", asset("gemm"), "--seed", "abc"}, "--seed expects a non-negative integer"},
      {{"eval", asset("gemm"), "-D", "M"}, "-D M:"},
      {{"eval", asset("gemm")}, "bind smaller sizes with -D"},
      {{"frobnicate"}, "unknown command 'frobnicate'"},
  };
  for (const Case& c : cases) {
    CliRun result = run(c.args);
    EXPECT_EQ(result.status, 1) << c.args.front();
    EXPECT_NE(result.err.find(c.message), std::string::npos) << result.err;
    EXPECT_EQ(std::count(result.err.begin(), result.err.end(), '\n'), 1) << result.err;
  }
}

TEST(Cli, EvalOfPerturbedIrFailsWithExitOneAndNamesTheOutput) {
  cli::CliHooks hooks;
  hooks.extra_passes.push_back(
      {"perturb", "replaces every exp by exp2",
       [](const scalar::ProgramPtr& program) {
         struct ExpToExp2 : scalar::Mutator {
           scalar::Expr mutate_Unary(const scalar::Unary& node, const scalar::Expr& self) override {
             if (node.op != scalar::UnaryOp::Exp) return Mutator::mutate_Unary(node, self);
             return scalar::unary(scalar::UnaryOp::Exp2, mutate(node.a), node.provenance);
           }
         } mutator;
         auto perturbed = std::make_shared<scalar::Program>(*program);
         perturbed->body = mutator.mutate(program->body);
         return scalar::ProgramPtr(perturbed);
       }});
  CliRun eval = run(with_sizes({"eval", asset("softmax")}, "softmax"), hooks);
  EXPECT_EQ(eval.status, 1);
  EXPECT_NE(eval.out.find("FAILED"), std::string::npos) << eval.out;
  EXPECT_NE(eval.err.find("nautilus: error: output Y differs from the float64 reference"),
            std::string::npos)
      << eval.err;
}

TEST(Cli, EvalSaveWritesNpyFilesAndManifest) {
  std::string dir = ::testing::TempDir() + "/nautilus_eval_save";
  std::filesystem::remove_all(dir);
  CliRun eval = run(with_sizes({"eval", asset("gemm"), "--save", dir}, "gemm"));
  ASSERT_EQ(eval.status, 0) << eval.err;
  for (std::string file : {"input_A.npy", "input_B.npy", "reference_C.npy", "output_C.npy",
                           "manifest.json"}) {
    EXPECT_TRUE(std::filesystem::exists(dir + "/" + file)) << file;
  }
  std::string npy = testing::read_text(dir + "/reference_C.npy");
  ASSERT_GT(npy.size(), 128u);
  EXPECT_EQ(npy.substr(0, 6), "\x93NUMPY");
  EXPECT_NE(npy.find("'descr': '<f8'"), std::string::npos);
  EXPECT_NE(npy.find("'shape': (12, 10)"), std::string::npos);
  EXPECT_EQ((npy.size() - 128) % 8, 0u);
  EXPECT_EQ(npy.size(), 128u + 12 * 10 * 8);  // header padded to 128 bytes here
  auto manifest = nlohmann::json::parse(testing::read_text(dir + "/manifest.json"));
  EXPECT_EQ(manifest["outputs"][0]["tensor"], "C");
  EXPECT_EQ(manifest["outputs"][0]["passed"], true);
}

TEST(Cli, HelpListsCommands) {
  CliRun help = run({"--help"});
  EXPECT_EQ(help.status, 0);
  for (std::string command : {"check", "lower", "eval"}) {
    EXPECT_NE(help.out.find(command), std::string::npos);
  }
  CliRun lower_help = run({"help", "lower"});
  EXPECT_NE(lower_help.out.find("--print-after-all"), std::string::npos);
  EXPECT_NE(lower_help.out.find("--diff-after-all"), std::string::npos);
}

// The real executable: exit codes and streams as a shell script sees them.
TEST(CliExecutable, ExitCodesAndStreams) {
  std::string cli = NAUTILUS_CLI_PATH;
  std::string err_file = ::testing::TempDir() + "/cli_err.txt";
  auto shell = [&](const std::string& args) {
    std::string command = cli + " " + args + " >/dev/null 2>" + err_file;
    int status = std::system(command.c_str());
    return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
  };
  EXPECT_EQ(shell("check " + asset("attention")), 0);
  EXPECT_EQ(shell("check " + source_path("assets/specs/errors") + "/does-not-exist.nt"), 1);
  EXPECT_NE(testing::read_text(err_file).find("cannot open"), std::string::npos);
  EXPECT_EQ(shell("eval " + asset("gemm") + " -D M=8 -D N=8 -D K=8"), 0);
}

}  // namespace
}  // namespace nautilus

#include "app/cli/pipeline_command.h"

#include <ostream>
#include <string>

#include <nlohmann/json.hpp>

#include "core/pipeline/complete.h"
#include "core/pipeline/graph.h"
#include "core/pipeline/machine.h"
#include "core/pipeline/solver.h"

namespace nautilus::cli {

const CommandSpec& pipeline_command_spec(const std::vector<OptionSpec>& shared_options) {
  static const CommandSpec spec = [&] {
    CommandSpec command{
        "pipeline",
        "nautilus pipeline FILE [--arch sm_80|sm_90a] [--max-regs N] [--stages N] [--json] "
        "[--schedule FILE] [--pin D]... [-D NAME=VALUE]...",
        "Solves software pipelining and warp specialization of a spec's pipelined loop (Z3).\n"
        "Lowers the spec to MA tile IR, builds the dependence graph of the loop's tile ops\n"
        "(latencies measured on an H100, units, registers, shared buffers) and finds, for the\n"
        "smallest initiation interval, each op's start cycle, stage and (sm_90a) warpgroup role.\n"
        "Prints the graph, the schedule, whether it is optimal or the best found in the time\n"
        "limit, the solve time and, for infeasible limits, the conflicting constraints\n"
        "(docs/pipeline.md), and the pipeline decision that realizes the answer in a\n"
        "schedule (what `nautilus schedule` appends). Exits 1 when no schedule exists.",
        shared_options};
    command.options.push_back({"arch", "ARCH", "machine to schedule for: sm_80 (default) or sm_90a"});
    command.options.push_back({"max-regs", "N", "cap every compute role's registers per thread"});
    command.options.push_back({"stages", "N", "pin every copied operand's ring depth to N buffers"});
    command.options.push_back({"max-ii", "CYCLES", "give up on intervals above CYCLES"});
    command.options.push_back({"consumers", "N", "sm_90a: pin the number of consumer warpgroups (1..3)"});
    command.options.push_back({"pin-role", "OP=ROLE",
                               "run OP on ROLE (sm_90a: producer, consumer0..consumer2; sm_80: "
                               "main); repeatable",
                               true});
    command.options.push_back({"pin-stage", "OP=N", "issue OP in stage N; repeatable", true});
    command.options.push_back({"time-limit", "SECONDS", "solver time limit in CPU seconds (default 25; wall time at most 4x)"});
    command.options.push_back({"kernel", "NAME", "the kernel whose loop to solve (default: the first with one)"});
    command.options.push_back({"cache", "DIR", "reuse and store proven solutions in DIR (one JSON file per graph)"});
    command.options.push_back({"json", "", "print the graph and the solution as JSON"});
    return command;
  }();
  return spec;
}

namespace {

bool read_count(const ParsedOptions& options, const std::string& name, int minimum, int* value,
                std::ostream& err) {
  if (!options.has(name)) return true;
  const auto parsed = parse_non_negative(options.get(name), 6);
  if (!parsed || static_cast<int>(*parsed) < minimum) {
    err << "nautilus: error: --" << name << " expects an integer >= " << minimum << ", got '"
        << options.get(name) << "'\n";
    return false;
  }
  *value = static_cast<int>(*parsed);
  return true;
}

// "OP=VALUE" -> (OP, VALUE); the op names never hold '=' (graph.h).
bool split_pin(const std::string& text, const std::string& option, std::string* op,
               std::string* value, std::ostream& err) {
  const size_t equals = text.rfind('=');
  if (equals == std::string::npos || equals == 0 || equals + 1 == text.size()) {
    err << "nautilus: error: --" << option << " expects OP=VALUE, got '" << text << "'\n";
    return false;
  }
  *op = text.substr(0, equals);
  *value = text.substr(equals + 1);
  return true;
}

}  // namespace

int run_pipeline_command(const driver::Compilation& compilation, const sched::Schedule& schedule,
                         const ParsedOptions& options, std::ostream& out, std::ostream& err) {
  const std::string arch = options.get("arch", "sm_80");
  const std::optional<pipeline::Machine> machine = pipeline::machine_for(arch);
  if (!machine || (arch != "sm_80" && arch != "sm_90a")) {
    err << "nautilus: error: --arch: unknown arch '" << arch << "'; expected sm_80 or sm_90a\n";
    return kExitFailure;
  }
  pipeline::SolveOptions solve_options;
  int value = 0;
  if (!read_count(options, "max-regs", 1, &value, err)) return kExitFailure;
  if (options.has("max-regs")) solve_options.max_registers = value;
  if (!read_count(options, "stages", 1, &value, err)) return kExitFailure;
  if (options.has("stages")) solve_options.stages = value;
  if (!read_count(options, "max-ii", 1, &value, err)) return kExitFailure;
  if (options.has("max-ii")) solve_options.max_ii = value;
  if (!read_count(options, "consumers", 1, &value, err)) return kExitFailure;
  if (options.has("consumers")) solve_options.consumers = value;
  if (options.has("time-limit")) {
    char* end = nullptr;
    const std::string text = options.get("time-limit");
    const double seconds = std::strtod(text.c_str(), &end);
    if (text.empty() || *end != '\0' || !(seconds > 0) || seconds > 3600) {
      err << "nautilus: error: --time-limit expects seconds in (0, 3600], got '" << text << "'\n";
      return kExitFailure;
    }
    solve_options.time_limit_seconds = seconds;
  }
  for (const std::string& text : options.all("pin-role")) {
    std::string op, role;
    if (!split_pin(text, "pin-role", &op, &role, err)) return kExitFailure;
    solve_options.role_pins.emplace_back(op, role);
  }
  for (const std::string& text : options.all("pin-stage")) {
    std::string op, stage;
    if (!split_pin(text, "pin-stage", &op, &stage, err)) return kExitFailure;
    const auto parsed = parse_non_negative(stage, 3);
    if (!parsed) {
      err << "nautilus: error: --pin-stage " << text << ": the stage must be a non-negative integer\n";
      return kExitFailure;
    }
    solve_options.stage_pins.emplace_back(op, static_cast<int>(*parsed));
  }
  if (!compilation.ma_module) {
    err << "nautilus: internal error: the pipeline did not build MA tile IR\n";
    return kExitInternal;
  }
  const pipeline::GraphResult built =
      pipeline::build_graph(*compilation.ma_module, *machine, options.get("kernel"));
  if (!built.graph) {
    err << "nautilus: error: " << built.error << "\n";
    return kExitFailure;
  }
  const pipeline::Graph& graph = *built.graph;
  // A warp-specialized kernel keeps its consumer warpgroups unless --consumers pins others, as
  // `nautilus schedule` does: its tile rows are 64 per consumer, and proving every other count
  // worse costs most of the time limit.
  if (!options.has("consumers")) {
    for (const matile::KernelPtr& kernel : compilation.ma_module->kernels) {
      if (kernel && kernel->name == graph.kernel && pipeline::consumer_warpgroups(*kernel) > 0) {
        solve_options.consumers = pipeline::consumer_warpgroups(*kernel);
        if (!options.has("json")) {
          out << "consumers: " << *solve_options.consumers
              << ", the kernel's own (--consumers N to pin others)\n";
        }
      }
    }
  }
  pipeline::SolveCache cache(options.get("cache"));
  const pipeline::Solution solution =
      pipeline::solve(graph, *machine, solve_options, options.has("cache") ? &cache : nullptr);
  const bool scheduled = solution.status == pipeline::SolveStatus::Optimal ||
                         solution.status == pipeline::SolveStatus::BestFound;
  // The schedule decision that realizes the answer (what `nautilus schedule` appends).
  std::string why_not;
  std::optional<sched::Decision> decision;
  const std::vector<matile::KernelPtr>& kernels = compilation.ma_module->kernels;
  const std::vector<int> held = pipeline::held_ring_slots(compilation);
  for (size_t k = 0; k < kernels.size(); ++k) {
    if (kernels[k]->name != graph.kernel) continue;
    const std::string block = pipeline::pipeline_block(
        schedule, k < compilation.kernel_blocks.size() ? compilation.kernel_blocks[k] : std::vector<std::string>{});
    decision = pipeline::realizing_decision(graph, solution, block, &why_not, k < held.size() ? held[k] : 0);
    break;
  }
  if (options.has("json")) {
    nlohmann::ordered_json document;
    document["machine"] = machine->description;
    document["graph"] = pipeline::graph_json(graph);
    document["solution"] = pipeline::solution_json(graph, solution);
    if (decision) document["decision"] = sched::print_decision(*decision);
    out << document.dump(2) << "\n";
  } else {
    out << "machine: " << machine->description << "\n"
        << pipeline::describe_graph(graph) << pipeline::describe_solution(graph, solution);
    if (decision) {
      out << "realized as: " << sched::print_decision(*decision) << "\n";
    } else if (scheduled) {
      out << "not realizable as a schedule decision: " << why_not << "\n";
    }
  }
  if (!scheduled) {
    err << "nautilus: error: no pipeline schedule: " << solution.summary << "\n";
    return kExitFailure;
  }
  return kExitOk;
}

}  // namespace nautilus::cli

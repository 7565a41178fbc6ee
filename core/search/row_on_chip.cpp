#include "core/search/row_on_chip.h"

#include <algorithm>
#include <set>
#include <string>

#include "core/search/program_facts.h"
#include "core/sched/cache_read.h"
#include "core/support/dtype.h"

namespace nautilus::search {

using sched::Decision;
using sched::DecisionArg;

namespace {

// The step of the rolling loop of a reducing block: the extent of the loop right under its
// loop over tiles (0 when the block is not rolled).
int64_t rolling_step(const NestFacts& nest, const BlockFacts& block) {
  for (size_t i = 0; i + 1 < block.loops.size(); ++i) {
    const LoopFacts* outer = nest.find_loop(block.loops[i]->var->name);
    const LoopFacts* inner = nest.find_loop(block.loops[i + 1]->var->name);
    if (outer && inner && outer->tile_outer && !outer->spatial && !outer->grid &&
        inner->tile_inner) {
      return inner->extent;
    }
  }
  return 0;
}

// The block that writes `buffer` in `program`, or nullptr.
const scalar::Block* writer_of(const ProgramFacts& facts, const std::string& buffer,
                               const NestFacts** nest_out,
                               std::vector<const scalar::For*>* loops) {
  for (const NestFacts& nest : facts.nests) {
    for (const BlockFacts& block : nest.blocks) {
      if (std::find(block.writes.begin(), block.writes.end(), buffer) != block.writes.end()) {
        *nest_out = &nest;
        *loops = block.loops;
        return block.block;
      }
    }
  }
  return nullptr;
}

}  // namespace

std::vector<std::vector<Decision>> row_on_chip_forms(const scalar::ProgramPtr& program) {
  std::vector<std::vector<Decision>> out;
  const ProgramFacts facts = analyze_program(*program);
  for (const NestFacts& nest : facts.nests) {
    if (nest.chain.empty() || !nest.has_reduction) continue;
    const std::string row_loop = nest.chain.back().name;
    std::set<std::string> tried;
    for (const BlockFacts& reducer : nest.blocks) {
      const int64_t step = reducer.reduction ? rolling_step(nest, reducer) : 0;
      if (step == 0) continue;
      for (const std::string& tensor : reducer.reads) {
        if (tried.count(tensor)) continue;
        const scalar::Buffer* buffer = program->find_buffer(tensor);
        if (!buffer || (*buffer)->scope != scalar::MemoryScope::Global) continue;
        // Another pass of the nest (not a reduction of the same rolled loop) reads it again.
        const bool reread = std::any_of(nest.blocks.begin(), nest.blocks.end(), [&](const BlockFacts& b) {
          return !b.reduction && std::find(b.reads.begin(), b.reads.end(), tensor) != b.reads.end();
        });
        if (!reread) continue;
        tried.insert(tensor);
        Decision cache{"cache_read", reducer.block->name,
                       {DecisionArg{"", tensor}, DecisionArg{"", std::string("shared")},
                        DecisionArg{"at", row_loop}, DecisionArg{"readers", std::string("all")}}};
        const sched::ApplyResult cached = sched::apply_decision(program, cache);
        if (!cached.ok()) continue;
        // The copy: its buffer must fit, and its loop is stepped like the passes that read it.
        const scalar::Buffer* local = nullptr;
        for (const scalar::Buffer& b : cached.program->allocations) {
          if (!program->find_buffer(b->name)) local = &b;
        }
        // One row (the MA lowering holds one-dimensional buffers on chip; a CTA of several
        // rows keeps reading them from memory).
        if (!local || (*local)->shape.size() != 1) continue;
        int64_t bytes = dtype_bytes((*local)->dtype);
        for (int64_t extent : (*local)->shape) bytes *= extent;
        // A longer row keeps its leading stages on chip and reads the rest from global memory
        // in every pass (the MA lowering decides how many fit; the cost model charges the
        // tail's reads and the one CTA per SM).
        if (bytes > kMostRowBytesOnChip) {
          cache.args.push_back(DecisionArg{"tail", std::string("global")});
        }
        std::vector<Decision> form = {cache};
        const ProgramFacts after = analyze_program(*cached.program);
        const NestFacts* copy_nest = nullptr;
        std::vector<const scalar::For*> copy_loops;
        const scalar::Block* copy = writer_of(after, (*local)->name, &copy_nest, &copy_loops);
        if (!copy) continue;
        for (const scalar::For* loop : copy_loops) {
          const LoopFacts* facts_of = copy_nest->find_loop(loop->var->name);
          if (!facts_of || facts_of->grid || loop->extent <= step) continue;
          const bool in_chain = std::any_of(copy_nest->chain.begin(), copy_nest->chain.end(),
                                            [&](const LoopFacts& l) { return l.loop == loop; });
          if (in_chain) continue;
          form.push_back(Decision{"tile", copy->name, {DecisionArg{axis_name(*copy, *loop), step}}});
        }
        out.push_back(std::move(form));
      }
    }
  }
  return out;
}

}  // namespace nautilus::search

#include "core/sched/reverse_compute_at.h"

#include <algorithm>

#include "core/scalar/printer.h"
#include "core/sched/decision_args.h"
#include "core/sched/loop_nest.h"
#include "core/sched/region.h"

namespace nautilus::sched {

using namespace scalar;

namespace {

constexpr std::string_view kSignature = "reverse_compute_at(CONSUMER, PRODUCER, LOOP)";

ApplyResult apply(const ProgramPtr& program, const Decision& decision) {
  const std::string reason = check_two_names(decision, kSignature, "PRODUCER and LOOP");
  if (!reason.empty()) return ApplyResult::failure(reason);
  const std::vector<const DecisionArg*> args = decision.positional();
  return reverse_compute_at(program, decision.target, args[0]->as_name(), args[1]->as_name());
}

bool is_whole(const IndexRange& range, int64_t extent) {
  return range.offset.empty() && range.lo == 0 && range.hi == extent;
}

}  // namespace

ApplyResult reverse_compute_at(const ProgramPtr& program, std::string_view consumer_name,
                               std::string_view producer_name, std::string_view loop_name) {
  std::string reason;
  const std::optional<MovePlace> place =
      find_move_place(*program, consumer_name, producer_name, loop_name, &reason);
  if (!place) return ApplyResult::failure(reason);
  const BlockPath* const consumer_path = &place->moved;
  const BlockPath* const producer_path = &place->anchor;
  const Block& producer = producer_path->block();
  const Block& consumer = consumer_path->block();
  const size_t depth = place->depth;
  const For& loop = *place->loop;
  const std::string& at = place->at;

  // 1. The producer writes one tensor and completes its elements within an iteration. Other
  //    writers of the tensor (a rolling sum's init, rescale and update blocks) count as part of
  //    the producer when they run under LOOP too and write the same part in each iteration:
  //    the part is then final at the end of the iteration all the same.
  const std::optional<StoreIndexing> indexing = store_indexing(producer, &reason);
  if (!indexing) return ApplyResult::failure(reason);
  const BufferNode* tensor = indexing->buffer.get();
  const BlockOrder order(program->body);
  const std::vector<const Block*> under = collect_blocks(producer_path->stmts[depth]);
  auto final_parts = [&](const BlockPath& path) -> std::optional<std::vector<IndexRange>> {
    const Block& writer = path.block();
    for (size_t i = 0; i < writer.iter_vars.size(); ++i) {
      if (writer.iter_vars[i].kind != IterKind::Reduce) continue;
      for (size_t d = 0; d <= depth; ++d) {
        const For* outer = path.stmts[d]->as<For>();
        if (outer && uses_var(writer.bindings[i], outer->var.get())) {
          reason = "loop " + outer->var->name + " iterates reduction axis " +
                   writer.iter_vars[i].var->name + " of block " + writer.name + "; " +
                   consumer.name + " can only be computed under loops over spatial axes, where "
                   "the values of " + tensor->name + " are final";
          return std::nullopt;
        }
      }
    }
    auto parts = parts_written(path, depth, &reason);
    if (!parts) reason += "; " + consumer.name + " could read elements a later iteration writes";
    return parts;
  };
  const std::optional<std::vector<IndexRange>> parts = final_parts(*producer_path);
  if (!parts) return ApplyResult::failure(reason);
  for (const Block* writer : order.writers(tensor)) {
    if (writer == &producer) continue;
    std::optional<std::vector<IndexRange>> other;
    if (contains_block(under, writer)) other = final_parts(*find_block(program->body, writer->name));
    if (!other || *other != *parts) {
      return ApplyResult::failure("tensor " + tensor->name + " is written by blocks " +
                                  block_list(order.writers(tensor)) + "; only a tensor whose "
                                  "writers all complete the same part in each iteration of " + at +
                                  " can be consumed inside its loops");
    }
  }

  // 2. The consumer's ranges: a variable that indexes the tensor runs over that dimension's
  //    part, the others over their extent.
  const BlockAccesses accesses = block_accesses(consumer);
  if (!accesses.reads_buffer(tensor)) {
    return ApplyResult::failure("block " + consumer.name + " does not read " + tensor->name +
                                ", which block " + producer.name + " writes");
  }
  std::vector<std::optional<IndexRange>> restricted(consumer.iter_vars.size());
  for (const Load* load : collect_loads(consumer_path->stmts.back(), tensor)) {
    for (size_t dim = 0; dim < load->indices.size(); ++dim) {
      const std::optional<size_t> i = iter_var_index(consumer, load->indices[dim]);
      if (!i) {
        return ApplyResult::failure("block " + consumer.name + " reads " + tensor->name +
                                    " at index " + print_expr(load->indices[dim]) +
                                    "; reverse_compute_at needs reads indexed directly by "
                                    "iteration variables");
      }
      const IterVar& iter = consumer.iter_vars[*i];
      IndexRange part = (*parts)[dim];
      clip_range(&part, iter.extent);
      if (restricted[*i] && *restricted[*i] != part) {
        return ApplyResult::failure("iteration variable " + iter.var->name + " of block " +
                                    consumer.name + " indexes parts " +
                                    restricted[*i]->to_string() + " and " + part.to_string() +
                                    " of " + tensor->name);
      }
      if (iter.kind == IterKind::Reduce && !is_whole(part, iter.extent)) {
        return ApplyResult::failure(
            "reduction axis " + iter.var->name + " of block " + consumer.name + " would only "
            "cover " + part.to_string() + " in one iteration of " + at);
      }
      restricted[*i] = part;
    }
  }
  // Every instance of the consumer must run in some iteration: the restricted variables move
  // with different loops, so that the iterations' ranges combine into the whole space.
  for (size_t i = 0; i < restricted.size(); ++i) {
    for (size_t j = 0; j < i; ++j) {
      if (!restricted[i] || !restricted[j]) continue;
      for (const auto& [outer, coefficient] : restricted[i]->offset) {
        for (const auto& [other, other_coefficient] : restricted[j]->offset) {
          if (outer != other) continue;
          return ApplyResult::failure(
              "iteration variables " + consumer.iter_vars[j].var->name + " and " +
              consumer.iter_vars[i].var->name + " of block " + consumer.name +
              " would both follow loop " + outer->var->name + ", so only some of their "
              "combinations would be computed");
        }
      }
    }
  }
  std::vector<IndexRange> ranges;
  for (size_t i = 0; i < consumer.iter_vars.size(); ++i) {
    ranges.push_back(restricted[i] ? *restricted[i]
                                   : IndexRange{{}, 0, consumer.iter_vars[i].extent});
  }

  // 3. The consumer's other inputs are complete before the loop, or written in the same
  //    iteration before it; its outputs are read only after the loop.
  const size_t loop_start = order.position(under.front());
  const size_t loop_end = order.position(under.back());
  for (const BufferNode* input : accesses.reads) {
    if (input == tensor) continue;
    for (const Block* writer : order.writers(input)) {
      if (writer == &consumer) continue;
      if (contains_block(under, writer)) {
        reason = uncovered_read(consumer, ranges, input, *find_block(program->body, writer->name),
                                depth);
        if (!reason.empty()) return ApplyResult::failure(reason);
      } else if (order.position(writer) > loop_start) {
        return ApplyResult::failure("block " + writer->name + " writes " + input->name +
                                    ", which block " + consumer.name + " reads, after " + at +
                                    "; " + consumer.name + " cannot move there");
      }
    }
  }
  for (const BufferNode* output : accesses.writes) {
    const std::vector<const Block*> output_writers = order.writers(output);
    if (output_writers.size() > 1) {
      return ApplyResult::failure("tensor " + output->name + " is written by blocks " +
                                  block_list(output_writers) + "; block " + consumer.name +
                                  " cannot move alone");
    }
    for (const Block* reader : order.readers(output)) {
      if (contains_block(under, reader) || order.position(reader) < loop_end) {
        return ApplyResult::failure("block " + reader->name + " reads " + output->name +
                                    ", which block " + consumer.name + " writes, before " + at +
                                    " ends; " + consumer.name + " cannot move there");
      }
    }
  }

  // 4. Remove the old nest and append the new one to the loop's body.
  std::set<std::string> taken;
  for (size_t d = 0; d <= depth; ++d) {
    if (const For* outer = producer_path->stmts[d]->as<For>()) taken.insert(outer->var->name);
  }
  Stmt nest = build_region_nest(consumer, ranges, &taken);
  Stmt body = remove_at(*consumer_path, consumer_path->stmts.size() - 1);
  const BlockPath path = *find_block(body, producer.name);
  const size_t loop_depth = *path.loop_depth(loop.var.get());
  const size_t end = loop_children(*path.stmts[loop_depth]->as<For>()).size();
  return ApplyResult::success(
      with_body(program, insert_into_loop(path, loop_depth, end, std::move(nest))));
}

DecisionKind reverse_compute_at_decision() {
  return {
      "reverse_compute_at",
      std::string(kSignature),
      "Move a consumer under a loop of its producer, consuming each tile as it is completed.",
      "CONSUMER moves to the end of the body of LOOP of PRODUCER's nest (PRODUCER writes one "
      "tensor X at its spatial iteration variables); its nest is rebuilt so that in each "
      "iteration the variables indexing X run over the part of X that iteration completed, and "
      "the others over their whole extent. The loops down to LOOP must iterate spatial axes of "
      "PRODUCER, CONSUMER's reductions may not be cut, its other inputs must be written before "
      "LOOP or in full earlier in the same iteration, and its outputs read after LOOP. Example: "
      "on attention tiled with m=4, reverse_compute_at(O, O_sum, m_o) casts each 4-row tile of "
      "O_sum right after computing it: `for m_o: ... for m in 0..4: for d: block O(..., "
      "m = m_o * 4 + m, ...)`.",
      apply,
  };
}

}  // namespace nautilus::sched

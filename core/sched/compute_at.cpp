#include "core/sched/compute_at.h"

#include <algorithm>

#include "core/scalar/affine.h"
#include "core/scalar/printer.h"
#include "core/sched/decision_args.h"
#include "core/sched/loop_nest.h"
#include "core/sched/region.h"

namespace nautilus::sched {

using namespace scalar;

namespace {

constexpr std::string_view kSignature = "compute_at(PRODUCER, CONSUMER, LOOP)";

ApplyResult apply(const ProgramPtr& program, const Decision& decision) {
  const std::string reason = check_two_names(decision, kSignature, "CONSUMER and LOOP");
  if (!reason.empty()) return ApplyResult::failure(reason);
  const std::vector<const DecisionArg*> args = decision.positional();
  return compute_at(program, decision.target, args[0]->as_name(), args[1]->as_name());
}

}  // namespace

ApplyResult compute_at(const ProgramPtr& program, std::string_view producer_name,
                       std::string_view consumer_name, std::string_view loop_name) {
  std::string reason;
  const std::optional<MovePlace> place =
      find_move_place(*program, producer_name, consumer_name, loop_name, &reason);
  if (!place) return ApplyResult::failure(reason);
  const BlockPath* const producer_path = &place->moved;
  const BlockPath* const consumer_path = &place->anchor;
  const Block& producer = producer_path->block();
  const Block& consumer = consumer_path->block();
  const size_t depth = place->depth;
  const For& loop = *place->loop;
  const std::string& at = place->at;

  // 1. The producer writes one intermediate tensor, alone, and every reader is under the loop.
  const std::optional<StoreIndexing> indexing = store_indexing(producer, &reason);
  if (!indexing) return ApplyResult::failure(reason);
  const BufferNode* tensor = indexing->buffer.get();
  if (tensor->role == BufferRole::Output) {
    return ApplyResult::failure("tensor " + tensor->name + " is an output; compute_at would "
                                "compute only the parts of it that blocks read");
  }
  const BlockOrder order(program->body);
  const std::vector<const Block*> writers = order.writers(tensor);
  if (writers.size() > 1) {
    return ApplyResult::failure("tensor " + tensor->name + " is written by blocks " +
                                block_list(writers) + "; only a tensor with one producer can move");
  }
  const std::vector<const Block*> under = collect_blocks(consumer_path->stmts[depth]);
  const std::vector<const Block*> readers = order.readers(tensor);
  if (readers.empty()) {
    return ApplyResult::failure("no block reads " + tensor->name + ", which block " +
                                producer.name + " writes; there is no place to compute it at");
  }
  for (const Block* reader : readers) {
    if (!contains_block(under, reader)) {
      return ApplyResult::failure("block " + reader->name + " reads " + tensor->name +
                                  " outside " + at + "; every reader of " + tensor->name +
                                  " must be under that loop (move " + reader->name +
                                  " there first)");
    }
  }

  // 2. The part of each dimension of the tensor that one iteration reads. The loop may iterate
  //    a reader's reduction axis (attention's key tiles): each iteration then computes the part
  //    of the tensor that this iteration's partial reduction reads, which is what makes a
  //    fused reduction read its input tile by tile instead of a stored row.
  std::vector<std::optional<IndexRange>> parts(tensor->shape.size());
  std::vector<const Block*> part_reader(tensor->shape.size());
  for (const Block* reader : readers) {
    const BlockPath reader_path = *find_block(program->body, reader->name);
    // A read may combine iteration variables (a split's `n + n_s * 1024`): its index over the
    // loops must then be affine, moving only with the loops outside the iteration.
    VarReplacements bindings;
    for (size_t i = 0; i < reader->iter_vars.size(); ++i) {
      bindings[reader->iter_vars[i].var.get()] = reader->bindings[i];
    }
    for (const Load* load : collect_loads(reader_path.stmts.back(), tensor)) {
      for (size_t dim = 0; dim < load->indices.size(); ++dim) {
        const std::optional<size_t> i = iter_var_index(*reader, load->indices[dim]);
        if (!i && !affine_of(substitute(load->indices[dim], bindings))) {
          return ApplyResult::failure(
              "block " + reader->name + " reads " + tensor->name + " at index " +
              print_expr(load->indices[dim]) + "; compute_at needs reads at affine indices of "
              "iteration variables");
        }
        const std::string what =
            i ? "iteration variable " + reader->iter_vars[*i].var->name + " of block " +
                    reader->name
              : "index " + print_expr(load->indices[dim]) + " of block " + reader->name +
                    "'s read of " + tensor->name;
        std::optional<IndexRange> part = range_in_iteration(
            i ? reader->bindings[*i] : substitute(load->indices[dim], bindings), reader_path,
            depth, what, &reason);
        if (!part) return ApplyResult::failure(reason);
        clip_range(&*part, tensor->shape[dim]);
        if (!parts[dim]) {
          parts[dim] = part;
          part_reader[dim] = reader;
        } else if (!merge_ranges(&*parts[dim], *part)) {
          const std::string who = part_reader[dim] == reader
                                      ? "block " + reader->name + " reads"
                                      : "blocks " + part_reader[dim]->name + " and " +
                                            reader->name + " read";
          return ApplyResult::failure(who + " different parts of dimension " +
                                      std::to_string(dim) + " of " + tensor->name +
                                      " in one iteration of " + at + " (" +
                                      parts[dim]->to_string() + " and " + part->to_string() +
                                      ")");
        }
      }
    }
  }

  // 3. The producer's new nest: spatial variables over the parts read, reduce variables whole.
  std::vector<IndexRange> ranges;
  for (const IterVar& iter : producer.iter_vars) ranges.push_back({{}, 0, iter.extent});
  for (size_t dim = 0; dim < parts.size(); ++dim) {
    if (parts[dim]->width() < 1) {
      return ApplyResult::failure("the readers of " + tensor->name + " under " + at +
                                  " read nothing of dimension " + std::to_string(dim));
    }
    ranges[indexing->iter_of_dim[dim]] = *parts[dim];
  }
  // 4. What the producer reads is complete before the loop, or written in the same iteration by
  //    a statement of the loop's body before the one with the first reader, where the producer
  //    will go.
  const std::vector<Stmt> loop_body = loop_children(loop);
  const auto child_of = [&](const Block* block) {
    size_t child = 0;
    while (!find_block(loop_body[child], block->name)) ++child;
    return child;
  };
  size_t insert_at = loop_body.size();
  for (const Block* reader : readers) insert_at = std::min(insert_at, child_of(reader));
  const size_t loop_start = order.position(under.front());
  for (const BufferNode* input : block_accesses(producer).reads) {
    if (input == tensor) continue;
    for (const Block* writer : order.writers(input)) {
      if (!contains_block(under, writer)) {
        if (order.position(writer) < loop_start) continue;
        return ApplyResult::failure("block " + writer->name + " writes " + input->name +
                                    ", which block " + producer.name + " reads, after " + at +
                                    "; " + producer.name + " cannot move there");
      }
      if (child_of(writer) >= insert_at) {
        return ApplyResult::failure("block " + writer->name + " writes " + input->name +
                                    ", which block " + producer.name + " reads, inside " + at +
                                    " no earlier than the readers of " + tensor->name + "; " +
                                    producer.name + " cannot move there");
      }
      reason = uncovered_read(producer, ranges, input, *find_block(program->body, writer->name),
                              depth);
      if (!reason.empty()) return ApplyResult::failure(reason);
    }
  }

  // 5. Remove the old nest, then insert the new one before the first reader in the loop.
  std::set<std::string> taken;
  for (size_t d = 0; d <= depth; ++d) {
    if (const For* outer = consumer_path->stmts[d]->as<For>()) taken.insert(outer->var->name);
  }
  Stmt nest = build_region_nest(producer, ranges, &taken);

  Stmt body = remove_at(*producer_path, producer_path->stmts.size() - 1);
  const BlockPath path = *find_block(body, consumer.name);
  const size_t loop_depth = *path.loop_depth(loop.var.get());
  // The producer may have been one of the loop's statements; find the first reader again.
  const std::vector<Stmt> children = loop_children(*path.stmts[loop_depth]->as<For>());
  size_t index = 0;
  while (std::none_of(readers.begin(), readers.end(), [&](const Block* reader) {
    return find_block(children[index], reader->name).has_value();
  })) {
    ++index;
  }
  return ApplyResult::success(
      with_body(program, insert_into_loop(path, loop_depth, index, std::move(nest))));
}

DecisionKind compute_at_decision() {
  return {
      "compute_at",
      std::string(kSignature),
      "Move a producer under a loop of its consumer, computing per iteration what it reads.",
      "PRODUCER (which writes one tensor X at its spatial iteration variables) moves into the "
      "body of LOOP of CONSUMER's nest, right before the first reader of X there; its nest is "
      "rebuilt to cover, in each iteration, only the part of X that the readers under LOOP read "
      "(reduce axes whole). Every reader of X must be under LOOP, and what PRODUCER reads must be written before "
      "LOOP or earlier in the same iteration. Example: on attention tiled with m=4, "
      "compute_at(S, O_sum, m_o) computes the 4 rows of S that each m_o iteration uses: "
      "`for m_o: for m in 0..4: for n: for d: block S(..., m = m_o * 4 + m, ...)`.",
      apply,
  };
}

}  // namespace nautilus::sched

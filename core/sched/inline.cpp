#include "core/sched/inline.h"

#include "core/sched/decision_args.h"
#include "core/sched/loop_nest.h"

namespace nautilus::sched {

using namespace scalar;

namespace {

constexpr std::string_view kSignature = "inline(TENSOR)";

ApplyResult apply(const ProgramPtr& program, const Decision& decision) {
  std::string reason = check_arg_shape(decision, kSignature, {0, 0, false});
  if (!reason.empty()) return ApplyResult::failure(reason);
  return inline_tensor(program, decision.target);
}

}  // namespace

ApplyResult inline_tensor(const ProgramPtr& program, std::string_view tensor) {
  const std::string name(tensor);
  const Buffer* buffer = program->find_buffer(name);
  if (!buffer) return ApplyResult::failure("program " + program->name + " has no tensor " + name);
  if ((*buffer)->role != BufferRole::Intermediate) {
    return ApplyResult::failure("tensor " + name + " is an " + buffer_role_name((*buffer)->role) +
                                "; only intermediate tensors can be inlined");
  }

  // 1. The producer: the one block that writes the tensor, elementwise, in the plain form.
  const BlockOrder order(program->body);
  const std::vector<const Block*> writers = order.writers(buffer->get());
  if (writers.empty()) return ApplyResult::failure("no block writes tensor " + name);
  if (writers.size() > 1) {
    return ApplyResult::failure("tensor " + name + " is written by blocks " + block_list(writers) +
                                "; only a tensor with one producer can be inlined");
  }
  const Block& producer = *writers.front();
  for (const IterVar& iter : producer.iter_vars) {
    if (iter.kind == IterKind::Reduce) {
      return ApplyResult::failure("block " + producer.name + " is a reduction (reduce " +
                                  iter.var->name + "); only elementwise blocks can be inlined");
    }
  }
  const Store* store = producer.body->as<Store>();
  const std::vector<const VarNode*> store_vars =
      store ? distinct_index_vars(store->indices) : std::vector<const VarNode*>{};
  if (!store || store->buffer.get() != buffer->get() ||
      store_vars.size() != producer.iter_vars.size() ||
      store->indices.size() != store_vars.size()) {
    return ApplyResult::failure("block " + producer.name + " is not a single store " + name +
                                "[iteration variables] = expression; it cannot be inlined");
  }
  const BlockAccesses reads = block_accesses(producer);
  if (reads.reads_buffer(buffer->get())) {
    return ApplyResult::failure("block " + producer.name + " reads " + name +
                                " itself; it cannot be inlined");
  }

  // 2. What the expression reads must hold the same values at the consumers.
  for (const BufferNode* read : reads.reads) {
    for (const Block* writer : order.writers(read)) {
      if (order.position(writer) > order.position(&producer)) {
        return ApplyResult::failure("tensor " + read->name + ", which block " + producer.name +
                                    " reads, is written by block " + writer->name +
                                    " after it; inlining " + name +
                                    " would read it at another time");
      }
    }
  }

  // 3. Substitute into every consumer, then drop the producer and the allocation.
  Stmt body = inline_loads(program->body, buffer->get(), store_vars, store->value);
  std::optional<BlockPath> path = find_block(body, producer.name);
  body = remove_at(*path, path->stmts.size() - 1);

  auto result = std::make_shared<Program>(*program);
  result->body = std::move(body);
  std::erase_if(result->allocations,
                [&](const Buffer& allocation) { return allocation == *buffer; });
  return ApplyResult::success(std::move(result));
}

DecisionKind inline_decision() {
  return {
      "inline",
      std::string(kSignature),
      "Compute an elementwise intermediate tensor inside every block that reads it.",
      "The block writing TENSOR must be elementwise (no reduction) and store TENSOR[iteration "
      "variables] = e. Every load of TENSOR elsewhere becomes e over the load's indices; the "
      "producer's nest and TENSOR's allocation disappear. Example: inline(P) on attention turns "
      "L's `L[b, h, m] + P[b, h, m, n]` into `L[b, h, m] + exp(S[b, h, m, n] - Mx[b, h, m])` "
      "and removes P.",
      apply,
  };
}

}  // namespace nautilus::sched

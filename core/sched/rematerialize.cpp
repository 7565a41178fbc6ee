#include "core/sched/rematerialize.h"

#include <algorithm>

#include "core/sched/decision_args.h"
#include "core/sched/loop_nest.h"

namespace nautilus::sched {

using namespace scalar;

namespace {

constexpr std::string_view kSignature = "rematerialize(TENSOR, CONSUMER)";

ApplyResult apply(const ProgramPtr& program, const Decision& decision) {
  const std::string reason = check_arg_shape(decision, kSignature, {1, 1, false});
  if (!reason.empty()) return ApplyResult::failure(reason);
  const DecisionArg* consumer = decision.positional()[0];
  if (consumer->is_int()) {
    return ApplyResult::failure(usage_reason(
        kSignature, "CONSUMER is a name, got " + std::to_string(consumer->as_int())));
  }
  return rematerialize(program, decision.target, consumer->as_name());
}

// The loop of `path` that iterates a reduce axis of `writer` and also encloses `writer`, or
// nullptr.
const For* reducing_loop(const BlockPath& writer_path, const BlockPath& other) {
  const Block& writer = writer_path.block();
  for (const Stmt& stmt : other.stmts) {
    const For* loop = stmt->as<For>();
    if (!loop || !writer_path.loop_depth(loop->var.get())) continue;
    for (size_t i = 0; i < writer.iter_vars.size(); ++i) {
      if (writer.iter_vars[i].kind == IterKind::Reduce &&
          uses_var(writer.bindings[i], loop->var.get())) {
        return loop;
      }
    }
  }
  return nullptr;
}

}  // namespace

ApplyResult rematerialize(const ProgramPtr& program, std::string_view tensor_name,
                          std::string_view consumer_name) {
  const std::string name(tensor_name);
  const Buffer* buffer = program->find_buffer(name);
  if (!buffer) return ApplyResult::failure("program " + program->name + " has no tensor " + name);
  if ((*buffer)->role == BufferRole::Input) {
    return ApplyResult::failure("tensor " + name + " is an input; there is nothing to recompute");
  }
  std::string reason;
  const std::optional<BlockPath> consumer_path = find_block(*program, consumer_name, &reason);
  if (!consumer_path) return ApplyResult::failure(reason);
  const Block& consumer = consumer_path->block();

  // 1. The producer: one elementwise block storing TENSOR[iteration variables] = e.
  const BlockOrder order(program->body);
  const std::vector<const Block*> writers = order.writers(buffer->get());
  if (writers.empty()) return ApplyResult::failure("no block writes tensor " + name);
  if (writers.size() > 1) {
    return ApplyResult::failure("tensor " + name + " is written by blocks " + block_list(writers) +
                                "; only a tensor with one producer can be recomputed");
  }
  const Block& producer = *writers.front();
  if (&producer == &consumer) {
    return ApplyResult::failure("block " + consumer.name + " is the producer of " + name);
  }
  if (std::any_of(producer.iter_vars.begin(), producer.iter_vars.end(),
                  [](const IterVar& iter) { return iter.kind == IterKind::Reduce; })) {
    return ApplyResult::failure("block " + producer.name + " is a reduction; only elementwise "
                                "tensors can be recomputed inside an expression");
  }
  const Store* store = producer.body->as<Store>();
  const std::vector<const VarNode*> store_vars =
      store ? distinct_index_vars(store->indices) : std::vector<const VarNode*>{};
  if (!store || store->buffer != *buffer || store_vars.size() != producer.iter_vars.size() ||
      store->indices.size() != store_vars.size()) {
    return ApplyResult::failure("block " + producer.name + " is not a single store " + name +
                                "[iteration variables] = expression; it cannot be recomputed");
  }
  const BlockAccesses producer_accesses = block_accesses(producer);
  if (producer_accesses.reads_buffer(buffer->get())) {
    return ApplyResult::failure("block " + producer.name + " reads " + name + " itself");
  }

  // 2. The consumer reads the tensor, and is not its only reader.
  if (!block_accesses(consumer).reads_buffer(buffer->get())) {
    return ApplyResult::failure("block " + consumer.name + " does not read " + name);
  }
  const std::vector<const Block*> readers = order.readers(buffer->get());
  if (readers.size() == 1 && (*buffer)->role != BufferRole::Output) {
    return ApplyResult::failure("block " + consumer.name + " is the only reader of " + name +
                                "; inline(" + name + ") recomputes it there and drops the "
                                "stored tensor");
  }

  // 3. What e reads has the same values at the consumer as at the producer.
  const BlockPath producer_path = *find_block(program->body, producer.name);
  for (const BufferNode* read : producer_accesses.reads) {
    for (const Block* writer : order.writers(read)) {
      if (order.position(writer) > order.position(&producer)) {
        return ApplyResult::failure("tensor " + read->name + ", which block " + producer.name +
                                    " reads, is written by block " + writer->name +
                                    " after it; recomputing " + name + " in " + consumer.name +
                                    " would read it at another time");
      }
      const BlockPath writer_path = *find_block(program->body, writer->name);
      for (const BlockPath* where : {&producer_path, &*consumer_path}) {
        if (const For* loop = reducing_loop(writer_path, *where)) {
          return ApplyResult::failure(
              "loop " + loop->var->name + " around block " + where->block().name +
              " iterates a reduction of block " + writer->name + ", so " + read->name +
              " is still changing there; recomputing " + name + " in " + consumer.name +
              " would read another value");
        }
      }
    }
  }

  // 4. Rewrite the consumer only.
  auto recompute = [&](const Stmt& stmt) {
    return inline_loads(stmt, buffer->get(), store_vars, store->value);
  };
  const Stmt rewritten = make_block(consumer.name, consumer.iter_vars, consumer.bindings,
                                    consumer.predicate,
                                    consumer.init ? recompute(consumer.init) : nullptr,
                                    recompute(consumer.body), consumer.provenance);
  return ApplyResult::success(with_body(
      program, replace_at(*consumer_path, consumer_path->stmts.size() - 1, rewritten)));
}

DecisionKind rematerialize_decision() {
  return {
      "rematerialize",
      std::string(kSignature),
      "Recompute an elementwise tensor inside one consumer instead of reading it, keeping the "
      "stored tensor for the others.",
      "The block writing TENSOR must be elementwise with the single store TENSOR[iteration "
      "variables] = e. In CONSUMER, every load of TENSOR becomes e over the load's indices; the "
      "producer and the other readers are unchanged (with CONSUMER the only reader, use "
      "inline). What e reads must be written before the producer and not be a running value "
      "of a reduction in a loop around the producer or CONSUMER. Example: on attention, "
      "rematerialize(P, O_sum) turns O_sum's `P[b, h, m, n] * f32(V[b, h, n, d])` into "
      "`exp(S[b, h, m, n] - Mx[b, h, m]) * f32(V[b, h, n, d])` while L still reads P.",
      apply,
  };
}

}  // namespace nautilus::sched

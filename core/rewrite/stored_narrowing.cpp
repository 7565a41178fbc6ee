#include "core/rewrite/stored_narrowing.h"

#include <map>
#include <optional>
#include <string>

#include "core/rewrite/dead_code.h"
#include "core/rewrite/support.h"

namespace nautilus::rewrite {
namespace {

bool is_16_bit(DType dtype) { return dtype == DType::BF16 || dtype == DType::F16; }

// Per buffer name: the one 16-bit type every load's every use casts to (nullopt once some use
// does something else). A buffer no load reads is not entered.
using ReadTypes = std::map<std::string, std::optional<DType>>;

void collect_read_types(const vrtile::Region& region, const KernelIndex& index, ReadTypes& out) {
  for (const OpPtr& op : region.ops) {
    if (op->kind == OpKind::For) {
      collect_read_types(*op->body, index, out);
      continue;
    }
    if (op->kind != OpKind::Load || !op->buffer) continue;
    auto [entry, fresh] = out.emplace(op->buffer->name, std::nullopt);
    std::optional<DType> type = fresh ? std::nullopt : entry->second;
    bool narrowed = fresh || entry->second.has_value();
    const std::vector<Use>& uses = index.uses(op->results[0]);
    if (uses.empty()) narrowed = false;
    for (const Use& use : uses) {
      const bool cast = use.op->kind == OpKind::Cast && is_16_bit(use.op->results[0]->type.dtype);
      if (!cast || (type && *type != use.op->results[0]->type.dtype)) {
        narrowed = false;
        break;
      }
      type = use.op->results[0]->type.dtype;
    }
    entry->second = narrowed ? type : std::nullopt;
  }
}

KernelPtr rewrite_kernel(const KernelPtr& kernel, const std::map<std::string, vrtile::Buffer>& narrow) {
  const KernelIndex index(*kernel);
  const auto narrowed = [&](const vrtile::Buffer& buffer) -> const vrtile::Buffer* {
    if (!buffer) return nullptr;
    auto found = narrow.find(buffer->name);
    return found == narrow.end() ? nullptr : &found->second;
  };
  Rebuilder rebuilder(*kernel);
  KernelPtr rebuilt = rebuilder.run(kernel, [&](const Op& original, const OpPtr& renamed,
                                                Rebuilder& out) {
    const Provenance& p = original.provenance;
    if (original.kind == OpKind::Load && narrowed(original.buffer)) {
      OpPtr load = vrtile::make_load(out.names().fresh(original.results[0]->name),
                                     *narrowed(original.buffer), vrtile::access_indices(*renamed),
                                     vrtile::access_mask(*renamed), renamed->constant, p);
      out.map()[original.results[0].get()] = load->results[0];
      out.emit(std::move(load));
      return;
    }
    if (original.kind == OpKind::Cast) {
      const Op* def = index.def(original.operands[0]);
      if (def && def->kind == OpKind::Load && narrowed(def->buffer)) {
        // The load already reads this type: the cast is the loaded tile itself.
        out.map()[original.results[0].get()] = renamed->operands[0];
        return;
      }
    }
    if (original.kind == OpKind::Store && narrowed(original.buffer)) {
      const vrtile::Buffer& buffer = *narrowed(original.buffer);
      const Value value = vrtile::stored_value(*renamed);
      const Value rounded = out.cast(value, buffer->dtype, value->name, p);
      out.emit(vrtile::make_store(buffer, vrtile::access_indices(*renamed), rounded,
                                  vrtile::access_mask(*renamed), p));
      return;
    }
    out.emit(renamed);
  });
  bool params_change = false;
  for (const vrtile::Buffer& param : kernel->params) params_change |= narrowed(param) != nullptr;
  if (!params_change) return rebuilt;
  vrtile::Kernel copy = *rebuilt;
  for (vrtile::Buffer& param : copy.params) {
    if (const vrtile::Buffer* n = narrowed(param)) param = *n;
  }
  return std::make_shared<const vrtile::Kernel>(std::move(copy));
}

}  // namespace

ModulePtr narrow_stored_intermediates(const ModulePtr& module) {
  if (!module) return module;
  ReadTypes reads;
  for (const KernelPtr& kernel : module->kernels) {
    if (!kernel) continue;
    const KernelIndex index(*kernel);
    collect_read_types(*kernel->body, index, reads);
  }
  std::map<std::string, vrtile::Buffer> narrow;
  for (const vrtile::Buffer& buffer : module->allocations) {
    if (!buffer || buffer->dtype != DType::F32 ||
        buffer->role != scalar::BufferRole::Intermediate) {
      continue;
    }
    auto found = reads.find(buffer->name);
    if (found == reads.end() || !found->second) continue;
    auto node = std::make_shared<scalar::BufferNode>(*buffer);
    node->dtype = *found->second;
    narrow.emplace(buffer->name, std::move(node));
  }
  if (narrow.empty()) return module;
  ModulePtr rewritten = map_kernels(
      module, [&](const KernelPtr& kernel) { return rewrite_kernel(kernel, narrow); });
  vrtile::Module copy = *rewritten;
  for (vrtile::Buffer& buffer : copy.allocations) {
    auto found = narrow.find(buffer->name);
    if (found != narrow.end()) buffer = found->second;
  }
  return eliminate_dead_code(std::make_shared<const vrtile::Module>(std::move(copy)));
}

}  // namespace nautilus::rewrite

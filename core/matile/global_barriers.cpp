#include "core/matile/global_barriers.h"

#include <algorithm>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "core/matile/hopper.h"

namespace nautilus::matile {
namespace {

using BufferSet = std::set<const scalar::BufferNode*>;

// The tracked buffers read and written since the last barrier of the thread group walking.
struct Pending {
  BufferSet read, written;

  void clear() {
    read.clear();
    written.clear();
  }
  void merge(const Pending& other) {
    read.insert(other.read.begin(), other.read.end());
    written.insert(other.written.begin(), other.written.end());
  }
};

// The barrier of the threads running a region: the CTA's, or a role's named barrier.
struct Sync {
  int role_index = -1;  // -1: the CTA
  int64_t role_threads = 0;
};

class GlobalOrder {
 public:
  explicit GlobalOrder(const Kernel& kernel) : kernel_(kernel) {
    BufferSet read;
    std::map<const scalar::BufferNode*, int> stores;
    collect(*kernel.body, &read, &stores);
    for (const auto& [buffer, count] : stores) {
      if (read.count(buffer) || count > 1) tracked_.insert(buffer);
    }
  }

  KernelPtr run(const KernelPtr& original) {
    if (tracked_.empty()) return original;
    Pending pending;
    RegionPtr body = walk(original->body, Sync{}, &pending);
    if (ordered_.empty()) return original;
    auto kernel = std::make_shared<Kernel>(*original);
    kernel->body = std::move(body);
    std::string names;
    for (const std::string& name : ordered_) names += (names.empty() ? "" : ", ") + name;
    kernel->notes.push_back(
        "barriers order the threads' accesses of " + names +
        ", which the kernel writes and then reads or writes again in global memory "
        "(order_global_accesses)");
    return kernel;
  }

 private:
  const scalar::BufferNode* read_buffer(const Op& op) const {
    switch (op.kind) {
      case OpKind::GlobalLoad:
      case OpKind::AsyncCopy: return op.buffer.get();
      case OpKind::TmaLoad: return kernel_.tma_maps[static_cast<size_t>(op.tma_map)].buffer.get();
      default: return nullptr;
    }
  }
  const scalar::BufferNode* written_buffer(const Op& op) const {
    switch (op.kind) {
      case OpKind::GlobalStore: return op.buffer.get();
      case OpKind::TmaStore: return kernel_.tma_maps[static_cast<size_t>(op.tma_map)].buffer.get();
      default: return nullptr;
    }
  }

  // The buffers read, and the number of store ops of each buffer written.
  void collect(const Region& region, BufferSet* read,
               std::map<const scalar::BufferNode*, int>* stores) const {
    for (const OpPtr& op : region.ops) {
      if (const scalar::BufferNode* buffer = read_buffer(*op)) read->insert(buffer);
      if (const scalar::BufferNode* buffer = written_buffer(*op)) ++(*stores)[buffer];
      if (op->body) collect(*op->body, read, stores);
      for (const WarpRole& role : op->roles) {
        if (role.body) collect(*role.body, read, stores);
      }
    }
  }

  static bool clears(const Op& op, const Sync& sync) {
    if (op.kind == OpKind::Barrier) return sync.role_index < 0;
    // A role's own barrier over all of its threads; a per-warpgroup barrier or a bare arrive
    // orders only some of them.
    return op.kind == OpKind::NamedBarrier && !op.arrive_only && op.warpgroup_ids.empty() &&
           sync.role_index >= 0 && op.barrier_threads == sync.role_threads;
  }

  OpPtr barrier(const Sync& sync, const Provenance& provenance) const {
    Op op;
    op.provenance = provenance;
    if (sync.role_index < 0) {
      op.kind = OpKind::Barrier;
    } else {
      op.kind = OpKind::NamedBarrier;
      op.barrier_id = kFirstRoleBarrierId + sync.role_index;
      op.barrier_threads = sync.role_threads;
    }
    return make_op(std::move(op));
  }

  // Walks `region` from `pending`, inserting barriers where an access needs one; `pending` is
  // left as the region leaves it.
  RegionPtr walk(const RegionPtr& region, const Sync& sync, Pending* pending, bool insert = true,
                 int* inserted = nullptr) {
    std::vector<OpPtr> ops;
    bool changed = false;
    auto add_barrier = [&](const OpPtr& before, const std::string& name) {
      if (inserted) ++*inserted;
      if (!insert) return;
      ops.push_back(barrier(sync, before->provenance));
      ordered_.insert(name);
      changed = true;
    };
    for (const OpPtr& op : region->ops) {
      if (clears(*op, sync)) pending->clear();
      const scalar::BufferNode* read = read_buffer(*op);
      const scalar::BufferNode* written = written_buffer(*op);
      if (read && !tracked_.count(read)) read = nullptr;
      if (written && !tracked_.count(written)) written = nullptr;
      const bool needs = (read && pending->written.count(read)) ||
                         (written && (pending->read.count(written) || pending->written.count(written)));
      if (needs) {
        add_barrier(op, (read ? read : written)->name);
        pending->clear();
      }
      if (read) pending->read.insert(read);
      if (written) pending->written.insert(written);

      OpPtr walked = op;
      if (op->kind == OpKind::For && op->body) {
        // The body starts from what comes before the loop or from its own previous iteration.
        // `iteration`: what one iteration leaves pending. A barrier the body would need only
        // for what comes before the loop goes before the loop, not into every iteration.
        Pending iteration;
        walk(op->body, sync, &iteration, /*insert=*/false);
        int steady = 0, entering = 0;
        Pending scratch = iteration;
        walk(op->body, sync, &scratch, /*insert=*/false, &steady);
        scratch = *pending;
        scratch.merge(iteration);
        walk(op->body, sync, &scratch, /*insert=*/false, &entering);
        if (entering > steady) {
          const scalar::BufferNode* first = pending->written.empty() ? *pending->read.begin()
                                                                     : *pending->written.begin();
          add_barrier(op, first->name);
          pending->clear();
        }
        Pending start = *pending;
        start.merge(iteration);
        Pending end = start;
        RegionPtr body = walk(op->body, sync, &end, insert, inserted);
        pending->merge(end);  // zero iterations leave `pending` as it was
        if (body != op->body) {
          auto copy = std::make_shared<Op>(*op);
          copy->body = std::move(body);
          walked = std::move(copy);
        }
      } else if (op->kind == OpKind::Roles) {
        // The roles run at once; each orders its own threads, and what any role leaves pending
        // is pending after them.
        std::vector<WarpRole> roles = op->roles;
        Pending after = *pending;
        bool roles_changed = false;
        for (size_t r = 0; r < roles.size(); ++r) {
          if (!roles[r].body) continue;
          Pending inside = *pending;
          const Sync role_sync{static_cast<int>(r), int64_t{roles[r].warpgroups} * kWarpgroupThreads};
          RegionPtr body = walk(roles[r].body, role_sync, &inside, insert, inserted);
          after.merge(inside);
          if (body != roles[r].body) {
            roles[r].body = std::move(body);
            roles_changed = true;
          }
        }
        *pending = std::move(after);
        if (roles_changed) {
          auto copy = std::make_shared<Op>(*op);
          copy->roles = std::move(roles);
          walked = std::move(copy);
        }
      }
      if (walked != op) changed = true;
      ops.push_back(std::move(walked));
    }
    return changed ? make_region(std::move(ops)) : region;
  }

  const Kernel& kernel_;
  BufferSet tracked_;
  std::set<std::string> ordered_;
};

}  // namespace

ModulePtr order_global_accesses(const ModulePtr& module) {
  if (!module) return module;
  auto result = std::make_shared<Module>(*module);
  bool any = false;
  for (KernelPtr& kernel : result->kernels) {
    if (!kernel || !kernel->body) continue;
    KernelPtr ordered = GlobalOrder(*kernel).run(kernel);
    if (ordered == kernel) continue;
    kernel = std::move(ordered);
    any = true;
  }
  return any ? ModulePtr(result) : module;
}

}  // namespace nautilus::matile

#include "views/snapshot_text.h"

#include <cctype>
#include <string>
#include <utility>

#include "core/matile/visitor.h"
#include "core/scalar/visitor.h"

namespace nautilus::views {
namespace {

NodeOrigin origin_of(const scalar::Provenance& provenance) {
  return {provenance.statement, provenance.range};
}

// scalar IR: every block by name (the DOT's "block:NAME").
class BlockOrigins : public scalar::Visitor {
 public:
  explicit BlockOrigins(NodeOrigins* out) : out_(out) {}

 protected:
  void visit_Block(const scalar::Block& node) override {
    (*out_)["block:" + node.name] = origin_of(node.provenance);
    scalar::Visitor::visit_Block(node);
  }

 private:
  NodeOrigins* out_;
};

void add_vr_region(const std::string& kernel, const vrtile::Region* region, int* store_count,
                   NodeOrigins* out) {
  if (region == nullptr) return;
  for (const vrtile::OpPtr& op : region->ops) {
    if (!op) continue;
    const NodeOrigin origin = origin_of(op->provenance);
    const auto name = [&](const vrtile::Value& value) { return "op:" + kernel + "/" + value->name; };
    switch (op->kind) {
      case vrtile::OpKind::For:
        if (op->loop_var) (*out)[name(op->loop_var)] = origin;
        for (const vrtile::Value& arg : op->block_args) {
          if (arg) (*out)[name(arg)] = origin;
        }
        add_vr_region(kernel, op->body.get(), store_count, out);
        for (const vrtile::Value& result : op->results) {
          if (result) (*out)[name(result)] = origin;
        }
        break;
      case vrtile::OpKind::Yield:
        break;
      case vrtile::OpKind::Store:
        (*out)["op:" + kernel + "/store#" + std::to_string((*store_count)++)] = origin;
        break;
      default:
        if (!op->results.empty() && op->results.front()) (*out)[name(op->results.front())] = origin;
        break;
    }
  }
}

// MA tile IR: every value by name, a For's loop variable and block arguments before the ops of
// its body and its results after them; an op without results by kind and position
// ("op:KERNEL/Barrier#3"), counted in program order through the whole kernel.
class MaOrigins : public matile::Visitor {
 public:
  MaOrigins(std::string kernel, NodeOrigins* out) : kernel_(std::move(kernel)), out_(out) {}

 protected:
  void visit_For(const matile::Op& op) override {
    const NodeOrigin origin = origin_of(op.provenance);
    if (op.loop_var) (*out_)[name(op.loop_var)] = origin;
    for (const matile::Value& arg : op.block_args) {
      if (arg) (*out_)[name(arg)] = origin;
    }
    if (op.body) visit(*op.body);
    for (const matile::Value& result : op.results) {
      if (result) (*out_)[name(result)] = origin;
    }
  }
  void visit_Yield(const matile::Op&) override {}
  void visit_op(const matile::Op& op) override {
    const NodeOrigin origin = origin_of(op.provenance);
    if (!op.results.empty() && op.results.front()) {
      (*out_)[name(op.results.front())] = origin;
    } else {
      (*out_)["op:" + kernel_ + "/" + matile::op_kind_name(op.kind) + "#" +
              std::to_string(counter_++)] = origin;
    }
  }

 private:
  std::string name(const matile::Value& value) const { return "op:" + kernel_ + "/" + value->name; }

  std::string kernel_;
  NodeOrigins* out_;
  int counter_ = 0;
};

}  // namespace

NodeOrigins node_origins(const driver::Snapshot& snapshot) {
  NodeOrigins out;
  switch (snapshot.stage) {
    case driver::Stage::Spec:
      if (!snapshot.spec) break;
      for (const spec::Tensor& tensor : snapshot.spec->tensors) {
        NodeOrigin origin{tensor.statement, {}};
        if (tensor.statement >= 0 &&
            tensor.statement < static_cast<int>(snapshot.spec->program.statements.size())) {
          origin.range = snapshot.spec->statement(tensor.statement).range;
        }
        out["tensor:" + tensor.name] = origin;
        out["stmt:" + tensor.name] = origin;
      }
      break;
    case driver::Stage::Scalar: {
      if (!snapshot.program) break;
      const scalar::Program& program = *snapshot.program;
      for (const auto* list : {&program.params, &program.allocations}) {
        for (const scalar::Buffer& buffer : *list) {
          if (buffer) out["buffer:" + buffer->name] = origin_of(buffer->provenance);
        }
      }
      BlockOrigins blocks(&out);
      if (program.body) blocks.visit(program.body);
      break;
    }
    case driver::Stage::VRTile:
      if (!snapshot.vr_module) break;
      for (const auto* list : {&snapshot.vr_module->params, &snapshot.vr_module->allocations}) {
        for (const scalar::Buffer& buffer : *list) {
          if (buffer) out["buffer:" + buffer->name] = origin_of(buffer->provenance);
        }
      }
      for (const vrtile::KernelPtr& kernel : snapshot.vr_module->kernels) {
        if (!kernel) continue;
        int stores = 0;
        for (const vrtile::GridAxis& axis : kernel->grid) {
          if (axis.var) out["op:" + kernel->name + "/" + axis.var->name] = origin_of(kernel->provenance);
        }
        add_vr_region(kernel->name, kernel->body.get(), &stores, &out);
      }
      break;
    case driver::Stage::MATile:
      if (!snapshot.ma_module) break;
      for (const auto* list : {&snapshot.ma_module->params, &snapshot.ma_module->allocations}) {
        for (const scalar::Buffer& buffer : *list) {
          if (buffer) out["buffer:" + buffer->name] = origin_of(buffer->provenance);
        }
      }
      for (const matile::KernelPtr& kernel : snapshot.ma_module->kernels) {
        if (!kernel) continue;
        for (const matile::GridAxis& axis : kernel->grid) {
          if (axis.var) out["op:" + kernel->name + "/" + axis.var->name] = origin_of(kernel->provenance);
        }
        MaOrigins(kernel->name, &out).visit(*kernel);
      }
      break;
    case driver::Stage::Cuda:
      break;
  }
  return out;
}

int cuda_spec_line(const std::string& line) {
  const size_t marker = line.find("// spec ");
  if (marker == std::string::npos) return 0;
  // "// spec FILE:LINE  text": the number after the first ':' following the file name.
  const size_t colon = line.find(':', marker + 8);
  if (colon == std::string::npos) return 0;
  int value = 0;
  size_t k = colon + 1;
  for (; k < line.size() && std::isdigit(static_cast<unsigned char>(line[k])); ++k) {
    value = value * 10 + (line[k] - '0');
    if (value > 10'000'000) return 0;
  }
  return k > colon + 1 ? value : 0;
}

std::string cuda_ma_value(const std::string& line) {
  size_t start = line.find_first_not_of(' ');
  if (start == std::string::npos || line.compare(start, 4, "// %") != 0) return {};
  start += 4;
  size_t end = start;
  while (end < line.size() && (std::isalnum(static_cast<unsigned char>(line[end])) ||
                               line[end] == '_' || line[end] == '.')) {
    ++end;
  }
  return line.substr(start, end - start);
}

}  // namespace nautilus::views

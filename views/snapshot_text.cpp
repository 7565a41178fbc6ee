#include "views/snapshot_text.h"

#include <algorithm>
#include <cctype>
#include <sstream>
#include <string_view>
#include <vector>

#include "core/matile/printer.h"
#include "core/scalar/printer.h"
#include "core/scalar/visitor.h"
#include "core/sched/decision.h"
#include "core/spec/printer.h"
#include "core/vrtile/printer.h"

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

void add_ma_region(const std::string& kernel, const matile::Region* region, int* counter,
                   NodeOrigins* out) {
  if (region == nullptr) return;
  for (const matile::OpPtr& op : region->ops) {
    if (!op) continue;
    const NodeOrigin origin = origin_of(op->provenance);
    const auto name = [&](const matile::Value& value) { return "op:" + kernel + "/" + value->name; };
    if (op->kind == matile::OpKind::For) {
      if (op->loop_var) (*out)[name(op->loop_var)] = origin;
      for (const matile::Value& arg : op->block_args) {
        if (arg) (*out)[name(arg)] = origin;
      }
      add_ma_region(kernel, op->body.get(), counter, out);
      for (const matile::Value& result : op->results) {
        if (result) (*out)[name(result)] = origin;
      }
      continue;
    }
    if (op->kind == matile::OpKind::Yield) continue;
    if (!op->results.empty() && op->results.front()) {
      (*out)[name(op->results.front())] = origin;
    } else {
      (*out)["op:" + kernel + "/" + matile::op_kind_name(op->kind) + "#" +
             std::to_string((*counter)++)] = origin;
    }
  }
}

std::vector<std::string_view> split_lines(const std::string& text) {
  std::vector<std::string_view> lines;
  size_t start = 0;
  while (start < text.size()) {
    size_t end = text.find('\n', start);
    if (end == std::string::npos) end = text.size();
    lines.emplace_back(text.data() + start, end - start);
    start = end + 1;
  }
  return lines;
}

}  // namespace

std::string snapshot_text(const driver::Snapshot& snapshot, const SourceFile* file) {
  switch (snapshot.stage) {
    case driver::Stage::Spec:
      return snapshot.spec ? spec::print_spec(*snapshot.spec) : std::string();
    case driver::Stage::Scalar:
      return snapshot.program ? scalar::print_program(*snapshot.program, file) : std::string();
    case driver::Stage::VRTile:
      return snapshot.vr_module ? vrtile::print_module(*snapshot.vr_module) : std::string();
    case driver::Stage::MATile:
      return snapshot.ma_module ? matile::print_module(*snapshot.ma_module) : std::string();
    case driver::Stage::Cuda:
      return snapshot.cuda ? snapshot.cuda->source : std::string();
  }
  return {};
}

std::string snapshot_dot(const driver::Snapshot& snapshot) {
  switch (snapshot.stage) {
    case driver::Stage::Spec:
      return snapshot.spec ? spec::spec_to_dot(*snapshot.spec) : std::string();
    case driver::Stage::Scalar:
      return snapshot.program ? scalar::program_to_dot(*snapshot.program) : std::string();
    case driver::Stage::VRTile:
      return snapshot.vr_module ? vrtile::module_to_dot(*snapshot.vr_module) : std::string();
    case driver::Stage::MATile:
      return snapshot.ma_module ? matile::module_to_dot(*snapshot.ma_module) : std::string();
    case driver::Stage::Cuda:
      return {};
  }
  return {};
}

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
        int counter = 0;
        for (const matile::GridAxis& axis : kernel->grid) {
          if (axis.var) out["op:" + kernel->name + "/" + axis.var->name] = origin_of(kernel->provenance);
        }
        add_ma_region(kernel->name, kernel->body.get(), &counter, &out);
      }
      break;
    case driver::Stage::Cuda:
      break;
  }
  return out;
}

std::string unified_diff(const std::string& before, const std::string& after,
                         const std::string& before_name, const std::string& after_name,
                         int context) {
  if (before == after) return {};
  const std::vector<std::string_view> a = split_lines(before);
  const std::vector<std::string_view> b = split_lines(after);
  // 1. Common prefix and suffix: passes change a few lines of long texts, so this leaves a small
  //    middle for the quadratic step.
  size_t prefix = 0;
  while (prefix < a.size() && prefix < b.size() && a[prefix] == b[prefix]) ++prefix;
  size_t suffix = 0;
  while (suffix < a.size() - prefix && suffix < b.size() - prefix &&
         a[a.size() - 1 - suffix] == b[b.size() - 1 - suffix]) {
    ++suffix;
  }
  const size_t n = a.size() - prefix - suffix;
  const size_t m = b.size() - prefix - suffix;
  // 2. Longest common subsequence of the middle (table of suffix lengths).
  std::vector<uint32_t> lcs((n + 1) * (m + 1), 0);
  const auto at = [&](size_t i, size_t j) -> uint32_t& { return lcs[i * (m + 1) + j]; };
  for (size_t i = n; i-- > 0;) {
    for (size_t j = m; j-- > 0;) {
      at(i, j) = a[prefix + i] == b[prefix + j] ? at(i + 1, j + 1) + 1
                                                 : std::max(at(i + 1, j), at(i, j + 1));
    }
  }
  // 3. The edit script over the whole texts: ' ' kept, '-' removed, '+' added.
  struct Edit {
    char op;
    size_t a_line;  // index into a (kept, removed) or the a position before it (added)
    size_t b_line;
  };
  std::vector<Edit> edits;
  for (size_t i = 0; i < prefix; ++i) edits.push_back({' ', i, i});
  size_t i = 0, j = 0;
  while (i < n || j < m) {
    if (i < n && j < m && a[prefix + i] == b[prefix + j]) {
      edits.push_back({' ', prefix + i, prefix + j});
      ++i, ++j;
    } else if (i < n && (j == m || at(i + 1, j) >= at(i, j + 1))) {
      // Removals first on a tie, so a changed line reads "-old" then "+new".
      edits.push_back({'-', prefix + i, prefix + j});
      ++i;
    } else {
      edits.push_back({'+', prefix + i, prefix + j});
      ++j;
    }
  }
  for (size_t k = 0; k < suffix; ++k) {
    edits.push_back({' ', prefix + n + k, prefix + m + k});
  }
  // 4. Hunks: runs of changes with `context` kept lines around them, merged when they touch.
  std::ostringstream out;
  out << "--- " << before_name << "\n+++ " << after_name << "\n";
  const size_t total = edits.size();
  size_t k = 0;
  const auto ctx = static_cast<size_t>(std::max(0, context));
  while (k < total) {
    while (k < total && edits[k].op == ' ') ++k;
    if (k == total) break;
    size_t begin = k >= ctx ? k - ctx : 0;
    size_t end = k;
    // Extend while the next change is within 2 * context kept lines.
    while (true) {
      while (end < total && edits[end].op != ' ') ++end;
      size_t next = end;
      while (next < total && edits[next].op == ' ') ++next;
      if (next < total && next - end <= 2 * ctx) {
        end = next;
        continue;
      }
      end = std::min(total, end + ctx);
      break;
    }
    size_t a_count = 0, b_count = 0;
    for (size_t e = begin; e < end; ++e) {
      if (edits[e].op != '+') ++a_count;
      if (edits[e].op != '-') ++b_count;
    }
    const size_t a_start = edits[begin].a_line + (a_count > 0 ? 1 : 0);
    const size_t b_start = edits[begin].b_line + (b_count > 0 ? 1 : 0);
    out << "@@ -" << a_start << "," << a_count << " +" << b_start << "," << b_count << " @@\n";
    for (size_t e = begin; e < end; ++e) {
      const Edit& edit = edits[e];
      out << edit.op << (edit.op == '+' ? b[edit.b_line] : a[edit.a_line]) << "\n";
    }
    k = end;
  }
  return out.str();
}

std::string pass_explanation(const driver::Snapshot& snapshot) {
  sched::DecisionParseError ignored;
  if (snapshot.stage == driver::Stage::Scalar) {
    if (auto decision = sched::parse_decision(snapshot.pass, &ignored)) {
      if (const sched::DecisionKind* kind = sched::find_decision_kind(decision->kind)) {
        return kind->description.empty() ? kind->summary : kind->description;
      }
    }
  }
  for (const driver::PassInfo& info : driver::pass_registry()) {
    if (info.name == snapshot.pass && !info.summary.empty()) return info.summary;
  }
  return snapshot.summary;
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

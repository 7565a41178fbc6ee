// build_graph: MA tile IR loop -> the solver's dependence graph (graph.h gives the rules).
#include "core/pipeline/graph.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <iomanip>
#include <map>
#include <set>
#include <sstream>

#include "core/matile/hopper.h"
#include "core/matile/printer.h"
#include "core/support/dtype.h"

namespace nautilus::pipeline {

using matile::Op;
using matile::OpKind;
using matile::ValueNode;

const char* node_kind_name(NodeKind kind) {
  switch (kind) {
    case NodeKind::AsyncCopy: return "cp.async";
    case NodeKind::TmaLoad: return "tma";
    case NodeKind::SharedLoad: return "ldmatrix";
    case NodeKind::Mma: return "mma";
    case NodeKind::Wgmma: return "wgmma";
    case NodeKind::Elementwise: return "elementwise";
    case NodeKind::Exchange: return "exchange";
    case NodeKind::FmaDot: return "fma_dot";
    case NodeKind::Memory: return "memory";
  }
  return "?";
}

double Node::latency() const {
  double busy = 0;
  for (double cycles : occupancy) busy += cycles;
  return fixed + busy;
}

double Node::first_latency() const {
  double busy = 0;
  for (double cycles : occupancy) busy += cycles;
  return fixed + busy / std::max(1, steps);
}

int Graph::find(const std::string& name) const {
  for (size_t i = 0; i < nodes.size(); ++i) {
    if (nodes[i].name == name) return static_cast<int>(i);
  }
  return -1;
}

int Graph::registers(const Node& node) const {
  const int64_t per_thread = 4 * int64_t{threads};
  return static_cast<int>((node.register_bytes + per_thread - 1) / per_thread);
}

bool Graph::released_in_iteration(size_t v) const {
  for (const Edge& edge : edges) {
    if (edge.through_shared && edge.from == static_cast<int>(v) && rings_released_in_iteration.count(edge.what)) {
      return true;
    }
  }
  return false;
}

int64_t Graph::realized_shared_bytes(const std::function<int64_t(size_t)>& depth_of) const {
  int64_t own = 0, together_bytes = 0, together_depth = 0;
  for (size_t v = 0; v < nodes.size(); ++v) {
    if (!nodes[v].is_copy()) continue;
    if (released_in_iteration(v)) {
      own += depth_of(v) * nodes[v].buffer_bytes;
    } else {
      together_bytes += nodes[v].buffer_bytes;
      together_depth = std::max(together_depth, depth_of(v));
    }
  }
  return fixed_shared_bytes + own + together_depth * together_bytes;
}

std::string Graph::canonical_text() const {
  std::ostringstream out;
  out << std::fixed << std::setprecision(1);
  out << "graph " << kernel << " " << loop << " " << arch << " " << form << " threads " << threads
      << " fixed_smem " << fixed_shared_bytes << "\n";
  for (const Node& node : nodes) {
    out << "node " << node.name << " " << node_kind_name(node.kind) << " fixed " << node.fixed;
    for (double cycles : node.occupancy) out << " " << cycles;
    out << " steps " << node.steps << " regs " << node.register_bytes << " buffer "
        << node.buffer_bytes << " var " << node.variable_latency << " sub " << node.subtile
        << " hand " << node.hand_role << "\n";
  }
  for (const Edge& edge : edges) {
    out << "edge " << edge.from << " " << edge.to << " " << edge.latency << " " << edge.distance
        << " " << edge.through_shared << "\n";
  }
  for (const std::string& ring : rings_released_in_iteration) out << "released_in_iteration " << ring << "\n";
  return out.str();
}

namespace {

bool is_sfu(scalar::UnaryOp op) {
  switch (op) {
    case scalar::UnaryOp::Exp: case scalar::UnaryOp::Exp2: case scalar::UnaryOp::Log:
    case scalar::UnaryOp::Log2: case scalar::UnaryOp::Sqrt: case scalar::UnaryOp::Rsqrt:
    case scalar::UnaryOp::Tanh: case scalar::UnaryOp::Sigmoid:
      return true;
    default:
      return false;
  }
}

// Total slots of a register tile over its threads (replicated elements count: each holder
// computes them) and the bytes they take.
int64_t slot_count(const matile::Value& value) {
  return value->layout.slots() * value->layout.threads();
}
int64_t register_bytes_of(const matile::Value& value) {
  return slot_count(value) * dtype_bytes(value->type.dtype);
}
int64_t product(const std::vector<int64_t>& extents) {
  int64_t result = 1;
  for (int64_t extent : extents) result *= extent;
  return result;
}

// Loops holding real work (copies or MMAs) inside a region.
bool has_work(const matile::Region& region) {
  for (const matile::OpPtr& op : region.ops) {
    if (!op) continue;
    switch (op->kind) {
      case OpKind::AsyncCopy: case OpKind::TmaLoad: case OpKind::Mma: case OpKind::Wgmma:
      case OpKind::FmaDot:
        return true;
      default:
        break;
    }
  }
  return false;
}

// The main loop of a warp role: its first loop holding real work. A persistent kernel's role
// walks its tiles in a tile loop (For `tile_loop`) around that main loop; each tile runs the same
// main loop, and its ring positions continue from tile to tile, so the loop to pipeline is the
// one inside.
const Op* role_main_loop(const matile::Region& region) {
  for (const matile::OpPtr& op : region.ops) {
    if (!op || op->kind != OpKind::For || !op->body) continue;
    if (op->tile_loop) return role_main_loop(*op->body);
    if (has_work(*op->body)) return op.get();
  }
  return nullptr;
}

struct Body {
  const Op* loop = nullptr;
  std::string role;   // Hopper form: the role running it
  int warpgroups = 0;
};

class GraphBuilder {
 public:
  GraphBuilder(const matile::Kernel& kernel, const Machine& machine)
      : kernel_(kernel), machine_(machine) {}

  GraphResult build(const std::vector<Body>& bodies, bool hopper_form) {
    hopper_form_ = hopper_form;
    graph_.kernel = kernel_.name;
    graph_.loop = bodies.front().loop->loop_var ? bodies.front().loop->loop_var->name : "?";
    graph_.trip_count = bodies.front().loop->extent;
    graph_.arch = machine_.arch;
    graph_.threads = static_cast<int>(kernel_.threads());
    if (hopper_form) {
      graph_.form = "hopper roles";
      graph_.threads = 128;
    } else {
      graph_.form = machine_.warp_specialized() ? "sm_80 loop retargeted to sm_90a" : "sm_80 loop";
      graph_.hand_stages = bodies.front().loop->pipeline_stages;
    }
    yields_.resize(bodies.size());
    for (size_t b = 0; b < bodies.size(); ++b) {
      body_ = static_cast<int>(b);
      role_ = bodies[b].role;
      last_node_ = -1;
      const Op& loop = *bodies[b].loop;
      for (size_t i = 0; i < loop.block_args.size(); ++i) {
        block_arg_[loop.block_args[i].get()] = {body_, static_cast<int>(i)};
      }
      for (const matile::OpPtr& op : loop.body->ops) {
        if (op) add(*op);
        if (!error_.empty()) return GraphResult{std::nullopt, error_};
      }
    }
    if (graph_.nodes.empty()) {
      return GraphResult{std::nullopt, "the loop of kernel " + kernel_.name + " holds no tile ops"};
    }
    make_edges();
    if (hopper_form_) {
      for (const auto& [alloc, nodes] : writers_) {
        for (int n : nodes) {
          if (graph_.nodes[static_cast<size_t>(n)].is_copy()) {
            graph_.hand_stages = std::max(graph_.hand_stages, kernel_.shared[static_cast<size_t>(alloc)].stages);
          }
        }
      }
    }
    // Shared memory outside the rings: allocations no copy of the loop fills.
    for (size_t a = 0; a < kernel_.shared.size(); ++a) {
      if (kernel_.shared[a].alias_of >= 0) continue;  // its bytes are its base's
      bool ring = false;
      for (int n : writers_[static_cast<int>(a)]) ring = ring || graph_.nodes[static_cast<size_t>(n)].is_copy();
      if (!ring) graph_.fixed_shared_bytes += kernel_.shared[a].byte_size;
      if (ring && kernel_.shared[a].released_in_iteration) {
        graph_.rings_released_in_iteration.insert(kernel_.shared[a].name);
      }
    }
    if (machine_.warp_specialized() && !hopper_form_) retarget();
    // Variable-latency copies get the machine's margin over their measured unloaded latency.
    // On sm_90a the boxes an MMA reads together (a GEMM's A and B, the gate and up projections'
    // X, Wg and Wu) land when the last of them does, all of their bytes delivered at the SM's
    // rate under load (copies_landing_together, Machine::loaded_stage_bytes_per_clock).
    const std::vector<int64_t> landing_bytes = copies_landing_together();
    for (size_t n = 0; n < graph_.nodes.size(); ++n) {
      Node& node = graph_.nodes[n];
      if (!node.variable_latency) continue;
      double busy = 0;
      for (double cycles : node.occupancy) busy += cycles;
      const double margin = machine_.copy_latency_margin();
      node.fixed = node.fixed * margin + busy * (margin - 1);
      if (landing_bytes[n] > node.buffer_bytes) {
        const double landing = static_cast<double>(landing_bytes[n]) / machine_.loaded_stage_bytes_per_clock;
        if (landing - busy > node.fixed) {
          node.fixed = landing - busy;
          node.landing_bytes = landing_bytes[n];
        }
      }
    }
    if (machine_.warp_specialized()) split_subtiles();
    recompute_edge_latencies();
    return GraphResult{std::move(graph_), ""};
  }

 private:
  // A node for `key` (merging into an existing one) or a new node.
  int node_for(const std::string& key, NodeKind kind, const std::string& name) {
    if (!key.empty()) {
      auto found = key_node_.find(key);
      if (found != key_node_.end()) return found->second;
    }
    Node node;
    node.kind = kind;
    node.name = unique(name);
    node.hand_role = role_;
    node.steps = 0;
    graph_.nodes.push_back(std::move(node));
    const int index = static_cast<int>(graph_.nodes.size()) - 1;
    if (!key.empty()) key_node_[key] = index;
    return index;
  }

  std::string unique(const std::string& name) {
    std::string result = name;
    for (int i = 2; graph_.find(result) >= 0; ++i) result = name + "#" + std::to_string(i);
    return result;
  }

  // Records that `node` runs `op`: its results, its reads, its label.
  void attach(int node_index, const Op& op) {
    Node& node = graph_.nodes[static_cast<size_t>(node_index)];
    node.steps += 1;
    node.ops.push_back(matile::op_label(op));
    for (const matile::Value& result : op.results) {
      if (!result) continue;
      produced_[result.get()] = node_index;
      if (node.rows == 0 && result->type.rank() >= 1) node.rows = result->type.shape[0];
    }
    for (const matile::Value& used : matile::used_values(op)) {
      if (used) uses_.push_back({node_index, used});
    }
    last_node_ = node_index;
  }

  void passthrough(const Op& op) {
    for (const matile::Value& result : op.results) {
      if (result) passthrough_[result.get()] = matile::used_values(op);
    }
  }

  std::string alloc_name(int alloc) const {
    if (alloc < 0 || alloc >= static_cast<int>(kernel_.shared.size())) return "?";
    return kernel_.shared[static_cast<size_t>(alloc)].name;
  }
  int64_t stage_bytes(int alloc) const {
    const matile::SharedAlloc& a = kernel_.shared[static_cast<size_t>(alloc)];
    return a.stage_elements * dtype_bytes(a.dtype);
  }

  void add(const Op& op) {
    const double bpc = machine_.copy_bytes_per_clock();
    const auto unit = [](Node& node, Unit u) -> double& {
      return node.occupancy[static_cast<size_t>(u)];
    };
    if (matile::is_synchronization(op.kind) || matile::only_synchronizes(op)) return;
    switch (op.kind) {
      case OpKind::Yield:
        yields_[static_cast<size_t>(body_)] = &op;
        return;
      case OpKind::For:
      case OpKind::Roles:
        error_ = "the pipelined loop of kernel " + kernel_.name +
                 " holds a nested " + matile::op_kind_name(op.kind) +
                 "; the solver takes a singly nested loop";
        return;
      case OpKind::Iota:
      case OpKind::Full:
      case OpKind::Broadcast:
      case OpKind::Permute:
      case OpKind::ExtractSlice:
        passthrough(op);
        return;
      case OpKind::ConvertLayout:
        if (!op.via_shared) {
          passthrough(op);
          return;
        }
        {
          const int n = node_for("", NodeKind::Exchange, "exchange:" + op.results[0]->name);
          Node& node = graph_.nodes[static_cast<size_t>(n)];
          unit(node, Unit::LSU) += 2.0 * static_cast<double>(register_bytes_of(op.results[0])) /
                                   machine_.shared_bytes_per_clock;
          node.fixed += 2 * machine_.named_barrier + machine_.lds_latency;
          attach(n, op);
        }
        return;
      case OpKind::AsyncCopy:
      case OpKind::TmaLoad: {
        const bool tma = op.kind == OpKind::TmaLoad;
        const std::string name = std::string(tma ? "tma:" : "cp.async:") + alloc_name(op.shared.alloc);
        const int n = node_for(name, tma ? NodeKind::TmaLoad : NodeKind::AsyncCopy, name);
        Node& node = graph_.nodes[static_cast<size_t>(n)];
        const matile::SharedAlloc& alloc = kernel_.shared[static_cast<size_t>(op.shared.alloc)];
        int64_t bytes = 0;
        if (tma && op.tma_map >= 0) {
          bytes = product(kernel_.tma_maps[static_cast<size_t>(op.tma_map)].box) * dtype_bytes(alloc.dtype);
        } else {
          bytes = product(op.tile_shape) * dtype_bytes(alloc.dtype);
        }
        unit(node, Unit::Copy) += static_cast<double>(bytes) / bpc;
        node.fixed = tma ? machine_.tma_latency_8k - 8192.0 / bpc
                         : std::max(0.0, machine_.cp_async_latency - 512.0 / bpc);
        node.variable_latency = true;
        node.buffer_bytes = stage_bytes(op.shared.alloc);
        writers_[op.shared.alloc].insert(n);
        attach(n, op);
        return;
      }
      case OpKind::SharedLoad: {
        const bool ldmatrix = op.shared_read != matile::SharedRead::Scalar;
        const std::string name = std::string(ldmatrix ? "ldmatrix:" : "ld.shared:") + alloc_name(op.shared.alloc);
        const int n = node_for(name, NodeKind::SharedLoad, name);
        Node& node = graph_.nodes[static_cast<size_t>(n)];
        unit(node, Unit::LSU) += static_cast<double>(register_bytes_of(op.results[0])) /
                                 machine_.shared_bytes_per_clock;
        node.fixed = ldmatrix ? machine_.ldmatrix_latency : machine_.lds_latency;
        readers_[op.shared.alloc].insert(n);
        attach(n, op);
        return;
      }
      case OpKind::Mma:
      case OpKind::Wgmma: {
        const bool wgmma = op.kind == OpKind::Wgmma;
        const matile::Value& c = op.operands.back();
        int n = -1;
        auto found = produced_.find(c.get());
        if (found != produced_.end()) {
          const Node& previous = graph_.nodes[static_cast<size_t>(found->second)];
          if (previous.kind == (wgmma ? NodeKind::Wgmma : NodeKind::Mma)) n = found->second;
        }
        if (n < 0) {
          n = node_for("", wgmma ? NodeKind::Wgmma : NodeKind::Mma,
                       std::string(wgmma ? "wgmma:" : "mma:") + op.results[0]->name);
        } else {
          // The chain's node is named after its last result (the value the loop carries on).
          graph_.nodes[static_cast<size_t>(n)].name =
              unique(std::string(wgmma ? "wgmma:" : "mma:") + op.results[0]->name);
        }
        Node& node = graph_.nodes[static_cast<size_t>(n)];
        const int64_t M = c->type.shape.size() == 2 ? c->type.shape[0] : 0;
        const int64_t N = c->type.shape.size() == 2 ? c->type.shape[1] : 0;
        if (wgmma) {
          const int64_t K = op.extent;
          // One instruction per 32 bytes of k: m64nNk16 for 16-bit operands, m64nNk32 for fp8,
          // each the same tensor-core time (the 8-bit form does twice the FLOPs per cycle).
          const int64_t b_bytes = op.shared_b.alloc >= 0 && op.shared_b.alloc < static_cast<int>(kernel_.shared.size())
                                      ? dtype_bytes(kernel_.shared[static_cast<size_t>(op.shared_b.alloc)].dtype)
                                      : 2;
          const int64_t k_step = b_bytes == 1 ? 32 : 16;
          unit(node, Unit::TensorCore) += machine_.wgmma_cycles(N, (M / 64) * (K / k_step));
          node.fixed = machine_.wgmma_latency - machine_.wgmma_interval_n128 * static_cast<double>(N) / 128.0;
          node.mma_shape = {M, N, node.mma_shape[2] + K};
          readers_[op.shared_b.alloc].insert(n);
          if (op.shared.alloc >= 0 && op.operands.size() < 2) readers_[op.shared.alloc].insert(n);
        } else {
          const int64_t K = op.operands[0]->type.shape.size() == 2 ? op.operands[0]->type.shape[1] : 0;
          // A tile of fewer than 16 rows issues whole m16 atoms; swapped (ir.h, Mma), one per 16
          // columns.
          const int64_t atoms = op.swapped ? (N / 16) : std::max<int64_t>(M / 16, 1) * (N / 8);
          unit(node, Unit::TensorCore) += machine_.mma_cycles(atoms * (K / 16));
          node.fixed = machine_.mma_latency - machine_.mma_interval;
          node.mma_shape = {M, N, node.mma_shape[2] + K};
        }
        attach(n, op);
        node.rows = M;
        return;
      }
      case OpKind::FmaDot: {
        const int n = node_for("", NodeKind::FmaDot, "fma_dot:" + op.results[0]->name);
        Node& node = graph_.nodes[static_cast<size_t>(n)];
        const matile::SharedAlloc& a = kernel_.shared[static_cast<size_t>(op.shared.alloc)];
        const int64_t K = a.shape.size() == 2 ? a.shape[1] : 1;
        unit(node, Unit::ALU) += static_cast<double>(slot_count(op.results[0]) * K) / machine_.alu_per_clock;
        node.fixed = machine_.lds_latency + machine_.ffma_latency;
        readers_[op.shared.alloc].insert(n);
        readers_[op.shared_b.alloc].insert(n);
        attach(n, op);
        return;
      }
      case OpKind::GlobalLoad:
      case OpKind::GlobalStore:
      case OpKind::SharedStore:
      case OpKind::StMatrix:
      case OpKind::TmaStore: {
        const std::string what = op.results.empty() || !op.results[0]
                                     ? std::string(matile::op_kind_name(op.kind))
                                     : op.results[0]->name;
        const int n = node_for("", NodeKind::Memory, std::string(matile::op_kind_name(op.kind)) + ":" + what);
        Node& node = graph_.nodes[static_cast<size_t>(n)];
        int64_t bytes = 0;
        if (!op.results.empty() && op.results[0]) bytes = register_bytes_of(op.results[0]);
        else if (!op.operands.empty() && op.operands.back()) bytes = register_bytes_of(op.operands.back());
        unit(node, Unit::LSU) += static_cast<double>(bytes) / machine_.shared_bytes_per_clock;
        node.fixed = op.kind == OpKind::GlobalLoad ? machine_.cp_async_latency : machine_.lds_latency;
        if (op.kind == OpKind::SharedStore || op.kind == OpKind::StMatrix) writers_[op.shared.alloc].insert(n);
        if (op.kind == OpKind::TmaStore) readers_[op.shared.alloc].insert(n);
        attach(n, op);
        return;
      }
      default:
        break;
    }
    // Element-wise ops and reduces. Address arithmetic on uniform scalars is left out.
    const matile::Value& result = op.results.empty() ? nullptr : op.results[0];
    if (!result) return;
    if (result->layout.kind == matile::LayoutKind::Uniform && result->type.rank() == 0) {
      passthrough(op);
      return;
    }
    const std::string run_class = result->type.rank() >= 2 ? "tile" : "vector";
    int n = -1;
    if (last_node_ >= 0 && graph_.nodes[static_cast<size_t>(last_node_)].kind == NodeKind::Elementwise &&
        last_class_ == run_class) {
      n = last_node_;
      Node& node = graph_.nodes[static_cast<size_t>(n)];
      node.name = unique(node.name.substr(0, node.name.find("..")) + ".." + result->name);
    } else {
      n = node_for("", NodeKind::Elementwise, "ew:" + result->name);
    }
    last_class_ = run_class;
    Node& node = graph_.nodes[static_cast<size_t>(n)];
    const matile::Value& source = op.kind == OpKind::Reduce ? op.operands[0] : result;
    const double elements = static_cast<double>(slot_count(source));
    if (op.kind == OpKind::Unary && is_sfu(op.unary_op)) {
      unit(node, Unit::SFU) += elements / machine_.sfu_per_clock;
      node.fixed += machine_.ex2_latency;
    } else if (op.kind == OpKind::Binary && op.binary_op == scalar::BinaryOp::Div) {
      unit(node, Unit::SFU) += elements / machine_.sfu_per_clock;
      unit(node, Unit::ALU) += elements / machine_.alu_per_clock;
      node.fixed += machine_.ex2_latency + machine_.ffma_latency;
    } else {
      unit(node, Unit::ALU) += elements / machine_.alu_per_clock;
      node.fixed += machine_.ffma_latency;
    }
    if (op.kind == OpKind::Reduce) {
      node.fixed += static_cast<double>(op.xor_masks.size()) * machine_.shuffle_latency;
      if (op.scratch >= 0) node.fixed += 2 * machine_.named_barrier + machine_.lds_latency;
    }
    attach(n, op);
  }

  struct Source {
    int node;
    int distance;
    const ValueNode* value;
  };

  void sources(const ValueNode* value, int distance, int depth, std::vector<Source>* out) const {
    if (depth > 64) return;
    if (auto p = produced_.find(value); p != produced_.end()) {
      out->push_back({p->second, distance, value});
      return;
    }
    if (auto p = passthrough_.find(value); p != passthrough_.end()) {
      for (const matile::Value& operand : p->second) {
        if (operand) sources(operand.get(), distance, depth + 1, out);
      }
      return;
    }
    if (auto arg = block_arg_.find(value); arg != block_arg_.end()) {
      if (distance >= 1) return;
      const Op* yield = yields_[static_cast<size_t>(arg->second.first)];
      const auto index = static_cast<size_t>(arg->second.second);
      if (yield && index < yield->operands.size() && yield->operands[index]) {
        sources(yield->operands[index].get(), distance + 1, depth + 1, out);
      }
    }
  }

  void add_edge(int from, int to, int distance, bool through_shared, const std::string& what) {
    for (Edge& edge : graph_.edges) {
      if (edge.from == from && edge.to == to && edge.distance == distance) {
        edge.through_shared = edge.through_shared || through_shared;
        return;
      }
    }
    Edge edge;
    edge.from = from;
    edge.to = to;
    edge.distance = distance;
    edge.through_shared = through_shared;
    edge.what = what;
    graph_.edges.push_back(edge);
  }

  void make_edges() {
    std::set<const ValueNode*> escaping;
    for (const auto& [node, value] : uses_) {
      std::vector<Source> found;
      sources(value.get(), 0, 0, &found);
      for (const Source& source : found) {
        if (source.node == node && source.distance == 0) continue;
        escaping.insert(source.value);
        add_edge(source.node, node, source.distance, false, source.value->name);
      }
    }
    // Loop-carried values leave their node through the yield even when nothing in the loop
    // reads them again (a carried value read only after the loop still takes its registers).
    for (const Op* yield : yields_) {
      if (!yield) continue;
      for (const matile::Value& value : yield->operands) {
        std::vector<Source> found;
        if (value) sources(value.get(), 0, 0, &found);
        for (const Source& source : found) escaping.insert(source.value);
      }
    }
    // Register bytes of each node's escaping results.
    std::set<const ValueNode*> counted;
    const auto count = [&](const matile::Value& value) {
      if (!value || !escaping.count(value.get()) || counted.count(value.get())) return;
      counted.insert(value.get());
      graph_.nodes[static_cast<size_t>(produced_.at(value.get()))].register_bytes += register_bytes_of(value);
    };
    for (const auto& [node, value] : uses_) {
      std::vector<Source> found;
      sources(value.get(), 0, 0, &found);
      for (const Source& source : found) {
        if (source.node == node && source.distance == 0) continue;
        count(find_value(source.value));
      }
    }
    for (const Op* yield : yields_) {
      if (!yield) continue;
      for (const matile::Value& value : yield->operands) {
        std::vector<Source> found;
        if (value) sources(value.get(), 0, 0, &found);
        for (const Source& source : found) count(find_value(source.value));
      }
    }
    // The k steps of a shared operand's fragments are loaded right before the mma that reads
    // them and die there: one step's fragments are live at a time (the lowering interleaves
    // ldmatrix and mma step by step).
    for (Node& node : graph_.nodes) {
      if (node.kind == NodeKind::SharedLoad && node.steps > 1) {
        node.register_bytes = node.register_bytes / node.steps;
      }
    }
    // Shared memory: writers of an allocation feed its readers in the same logical iteration.
    for (const auto& [alloc, writer_nodes] : writers_) {
      auto readers = readers_.find(alloc);
      if (readers == readers_.end()) continue;
      for (int w : writer_nodes) {
        for (int r : readers->second) {
          if (w == r) continue;
          add_edge(w, r, 0, graph_.nodes[static_cast<size_t>(w)].is_copy(), alloc_name(alloc));
        }
      }
    }
  }

  // Per copy node, the bytes of the copies that land together with it: on sm_90a those whose
  // buffers one op reads (joined transitively), elsewhere its own.
  std::vector<int64_t> copies_landing_together() const {
    const size_t count = graph_.nodes.size();
    std::vector<int64_t> own(count, 0);
    std::vector<size_t> group(count);
    for (size_t n = 0; n < count; ++n) {
      group[n] = n;
      if (graph_.nodes[n].variable_latency) own[n] = graph_.nodes[n].buffer_bytes;
    }
    if (!machine_.warp_specialized()) return own;
    const auto root = [&](size_t n) {
      while (group[n] != n) n = group[n] = group[group[n]];
      return n;
    };
    std::map<int, size_t> first_copy_read_by;
    for (const Edge& edge : graph_.edges) {
      if (!edge.through_shared || !graph_.nodes[static_cast<size_t>(edge.from)].is_copy()) continue;
      auto [it, inserted] = first_copy_read_by.emplace(edge.to, static_cast<size_t>(edge.from));
      if (!inserted) group[root(static_cast<size_t>(edge.from))] = root(it->second);
    }
    std::vector<int64_t> total(count, 0);
    for (size_t n = 0; n < count; ++n) total[root(n)] += own[n];
    std::vector<int64_t> landing(count, 0);
    for (size_t n = 0; n < count; ++n) landing[n] = own[n] > 0 ? total[root(n)] : 0;
    return landing;
  }

  // The shared_ptr of a produced value (kept alive by the kernel), from its node pointer.
  matile::Value find_value(const ValueNode* value) const {
    auto found = owners_.find(value);
    if (found != owners_.end()) return found->second;
    return nullptr;
  }

 public:
  void remember_values(const matile::Region& region) {
    for (const matile::OpPtr& op : region.ops) {
      if (!op) continue;
      for (const matile::Value& result : op->results) {
        if (result) owners_[result.get()] = result;
      }
      if (op->body) remember_values(*op->body);
      for (const matile::WarpRole& role : op->roles) {
        if (role.body) remember_values(*role.body);
      }
    }
  }

 private:
  // sm_80 form read for sm_90a: TMA copies, wgmma chains reading shared operands directly.
  void retarget() {
    const double bpc = machine_.copy_bytes_per_clock();
    std::vector<bool> drop(graph_.nodes.size(), false);
    for (Node& node : graph_.nodes) {
      if (node.kind == NodeKind::AsyncCopy) {
        node.kind = NodeKind::TmaLoad;
        node.fixed = machine_.tma_latency_8k - 8192.0 / bpc;
        node.name = "tma:" + node.name.substr(node.name.find(':') + 1);
      } else if (node.kind == NodeKind::Mma) {
        const auto [M, N, K] = node.mma_shape;
        node.kind = NodeKind::Wgmma;
        node.occupancy[static_cast<size_t>(Unit::TensorCore)] = machine_.wgmma_cycles(N, (M / 64) * (K / 16));
        node.fixed = machine_.wgmma_latency - machine_.wgmma_interval_n128 * static_cast<double>(N) / 128.0;
        node.name = "wgmma:" + node.name.substr(node.name.find(':') + 1);
      }
    }
    // ldmatrix nodes that only feed wgmma chains disappear: wgmma reads shared memory itself.
    for (size_t i = 0; i < graph_.nodes.size(); ++i) {
      if (graph_.nodes[i].kind != NodeKind::SharedLoad) continue;
      bool only_mma = true, any = false;
      for (const Edge& edge : graph_.edges) {
        if (edge.from != static_cast<int>(i)) continue;
        any = true;
        only_mma = only_mma && graph_.nodes[static_cast<size_t>(edge.to)].kind == NodeKind::Wgmma;
      }
      if (any && only_mma) drop[i] = true;
    }
    std::vector<Edge> edges;
    for (const Edge& edge : graph_.edges) {
      if (drop[static_cast<size_t>(edge.from)]) continue;
      if (drop[static_cast<size_t>(edge.to)]) {
        for (const Edge& next : graph_.edges) {
          if (next.from != edge.to) continue;
          Edge joined = edge;
          joined.to = next.to;
          joined.distance = edge.distance + next.distance;
          edges.push_back(joined);
        }
        continue;
      }
      edges.push_back(edge);
    }
    std::vector<int> index(graph_.nodes.size(), -1);
    std::vector<Node> nodes;
    for (size_t i = 0; i < graph_.nodes.size(); ++i) {
      if (drop[i]) continue;
      index[i] = static_cast<int>(nodes.size());
      nodes.push_back(graph_.nodes[i]);
    }
    graph_.nodes = std::move(nodes);
    graph_.edges.clear();
    for (Edge edge : edges) {
      edge.from = index[static_cast<size_t>(edge.from)];
      edge.to = index[static_cast<size_t>(edge.to)];
      bool seen = false;
      for (Edge& kept : graph_.edges) {
        if (kept.from == edge.from && kept.to == edge.to && kept.distance == edge.distance) {
          kept.through_shared = kept.through_shared || edge.through_shared;
          seen = true;
        }
      }
      if (!seen) graph_.edges.push_back(edge);
    }
    graph_.threads = 128;
  }

  // Ops over the CTA tile's rows split into 64-row sub-tiles, one per wgmma warpgroup.
  void split_subtiles() {
    int64_t tile_rows = 0;
    for (const Node& node : graph_.nodes) {
      if (node.kind == NodeKind::Wgmma) tile_rows = std::max(tile_rows, node.mma_shape[0]);
    }
    if (tile_rows < 128 || tile_rows % 64 != 0) return;
    const int parts = static_cast<int>(tile_rows / 64);
    std::vector<std::vector<int>> index(graph_.nodes.size());
    std::vector<Node> nodes;
    for (size_t i = 0; i < graph_.nodes.size(); ++i) {
      const Node& node = graph_.nodes[i];
      const bool split = !node.is_copy() && node.rows == tile_rows;
      if (!split) {
        index[i].push_back(static_cast<int>(nodes.size()));
        nodes.push_back(node);
        continue;
      }
      for (int p = 0; p < parts; ++p) {
        Node part = node;
        part.name = node.name + ".h" + std::to_string(p);
        part.subtile = p;
        for (double& cycles : part.occupancy) cycles /= parts;
        part.register_bytes = node.register_bytes / parts;
        part.rows = node.rows / parts;
        part.mma_shape[0] = node.mma_shape[0] / parts;
        index[i].push_back(static_cast<int>(nodes.size()));
        nodes.push_back(part);
      }
    }
    std::vector<Edge> edges;
    for (const Edge& edge : graph_.edges) {
      const auto& from = index[static_cast<size_t>(edge.from)];
      const auto& to = index[static_cast<size_t>(edge.to)];
      if (from.size() > 1 && to.size() > 1) {
        for (size_t p = 0; p < from.size(); ++p) {
          Edge e = edge;
          e.from = from[p];
          e.to = to[p];
          edges.push_back(e);
        }
        continue;
      }
      for (int f : from) {
        for (int t : to) {
          Edge e = edge;
          e.from = f;
          e.to = t;
          edges.push_back(e);
        }
      }
    }
    graph_.nodes = std::move(nodes);
    graph_.edges = std::move(edges);
    graph_.threads = 128;
  }

  void recompute_edge_latencies() {
    for (Edge& edge : graph_.edges) {
      const Node& from = graph_.nodes[static_cast<size_t>(edge.from)];
      const Node& to = graph_.nodes[static_cast<size_t>(edge.to)];
      const bool chain = from.kind == NodeKind::Mma || from.kind == NodeKind::Wgmma;
      const bool streamed = from.kind == NodeKind::SharedLoad &&
                            (to.kind == NodeKind::Mma || to.kind == NodeKind::Wgmma);
      edge.latency = streamed ? from.first_latency() : from.latency();
      // An accumulator carried into the same chain's next iteration: each fragment's next mma
      // waits only for that fragment's last one, so the chain follows itself at its issue rate.
      if (chain && edge.from == edge.to) {
        edge.latency = from.occupancy[static_cast<size_t>(Unit::TensorCore)];
      }
      // On the cp.async path the data a copy landed is visible CTA-wide only after
      // cp.async.wait_group and bar.sync (on sm_90a the mbarrier hand-off is the solver's).
      if (edge.through_shared && !machine_.warp_specialized()) edge.latency += machine_.named_barrier;
    }
  }

  const matile::Kernel& kernel_;
  const Machine& machine_;
  bool hopper_form_ = false;
  Graph graph_;
  std::string error_;
  int body_ = 0;
  std::string role_;
  int last_node_ = -1;
  std::string last_class_;
  std::map<std::string, int> key_node_;
  std::map<const ValueNode*, int> produced_;
  std::map<const ValueNode*, std::vector<matile::Value>> passthrough_;
  std::map<const ValueNode*, std::pair<int, int>> block_arg_;
  std::map<const ValueNode*, matile::Value> owners_;
  std::vector<const Op*> yields_;
  std::vector<std::pair<int, matile::Value>> uses_;
  std::map<int, std::set<int>> writers_, readers_;
};

}  // namespace

GraphResult build_graph(const matile::Module& module, const Machine& machine,
                        const std::string& kernel_name) {
  bool named_found = false;
  for (const matile::KernelPtr& kernel : module.kernels) {
    if (!kernel || !kernel->body) continue;
    if (!kernel_name.empty() && kernel->name != kernel_name) continue;
    named_found = true;
    std::vector<Body> bodies;
    bool hopper_form = false;
    for (const matile::OpPtr& op : kernel->body->ops) {
      if (!op) continue;
      if (op->kind == OpKind::For && op->pipeline_stages > 0 && op->body) {
        bodies.push_back({op.get(), "", 0});
        break;
      }
      if (op->kind == OpKind::Roles) {
        for (const matile::WarpRole& role : op->roles) {
          if (!role.body) continue;
          if (const Op* loop = role_main_loop(*role.body)) {
            bodies.push_back({loop, role.name, role.warpgroups});
          }
        }
        hopper_form = !bodies.empty();
        if (hopper_form) break;
      }
    }
    if (bodies.empty()) continue;
    if (hopper_form && !machine.warp_specialized()) {
      return GraphResult{std::nullopt, "kernel " + kernel->name +
                                           " is in Hopper form (warp roles, TMA, wgmma): solve it for sm_90a"};
    }
    GraphBuilder builder(*kernel, machine);
    builder.remember_values(*kernel->body);
    return builder.build(bodies, hopper_form);
  }
  if (!kernel_name.empty() && !named_found) {
    return GraphResult{std::nullopt, "the module has no kernel named '" + kernel_name + "'"};
  }
  return GraphResult{std::nullopt,
                     "no kernel of module " + module.name +
                         " has a software-pipelined loop (a loop with pipeline stages, or warp "
                         "roles running loops); the solver pipelines loops that copy tiles"};
}

std::string describe_graph(const Graph& graph) {
  std::ostringstream out;
  out << std::fixed << std::setprecision(0);
  out << "graph of kernel " << graph.kernel << ", loop " << graph.loop << " (" << graph.trip_count
      << " iterations), " << graph.form << ": " << graph.nodes.size() << " ops, "
      << graph.edges.size() << " edges";
  if (graph.hand_stages > 0) out << "; the hand-written kernel uses " << graph.hand_stages << " stages";
  out << "\n";
  size_t width = 4;
  for (const Node& node : graph.nodes) width = std::max(width, node.name.size());
  out << "  " << std::left << std::setw(static_cast<int>(width)) << "op"
      << "  latency  regs  buffer/stage  units (busy cycles)\n";
  for (const Node& node : graph.nodes) {
    out << "  " << std::left << std::setw(static_cast<int>(width)) << node.name << "  "
        << std::right << std::setw(7) << node.latency() << "  " << std::setw(4)
        << graph.registers(node) << "  " << std::setw(12)
        << (node.buffer_bytes ? std::to_string(node.buffer_bytes) + " B" : std::string("-")) << "  ";
    bool first = true;
    for (int u = 0; u < kUnitCount; ++u) {
      if (node.occupancy[static_cast<size_t>(u)] <= 0) continue;
      out << (first ? "" : ", ") << unit_name(static_cast<Unit>(u)) << " "
          << std::ceil(node.occupancy[static_cast<size_t>(u)]);
      first = false;
    }
    if (node.landing_bytes > 0) {
      out << " (variable latency: lands with the boxes its MMA reads beside it, " << node.landing_bytes
          << " B at the loaded rate)";
    } else if (node.variable_latency) {
      out << " (variable latency: measured L2-hit latency x margin)";
    }
    if (!node.hand_role.empty()) out << " [hand role " << node.hand_role << "]";
    out << "\n";
  }
  out << "  edges:\n";
  for (const Edge& edge : graph.edges) {
    out << "    " << graph.nodes[static_cast<size_t>(edge.from)].name << " -> "
        << graph.nodes[static_cast<size_t>(edge.to)].name << "  " << edge.latency << " cycles";
    if (edge.distance > 0) out << ", distance " << edge.distance;
    out << "  (" << (edge.through_shared ? "buffer " : "") << edge.what << ")\n";
  }
  if (graph.fixed_shared_bytes > 0) {
    out << "  shared memory outside the rings: " << graph.fixed_shared_bytes << " B\n";
  }
  return out.str();
}

}  // namespace nautilus::pipeline

#include "core/vrtile/printer.h"

#include <algorithm>
#include <cmath>
#include <string_view>
#include <vector>

#include "core/scalar/print_support.h"
#include "core/scalar/printer.h"

namespace nautilus::vrtile {
namespace {

using scalar::buffer_type;
using scalar::compare_word;
using scalar::constant_text;
using scalar::dot_quote;
using scalar::float_digits;
using scalar::int_list;
using scalar::iter_args_text;
using scalar::provenance_json;
using scalar::shape_json;
using scalar::value_list;
using scalar::value_ref;

constexpr const char* kNull = scalar::kNullText;

// ---------------------------------------------------------------------------------------------
// Names and constants

std::string buffer_name(const Buffer& buffer) { return buffer ? buffer->name : kNull; }

std::string result_type(const Op& op) {
  return op.results.empty() || !op.results.front() ? kNull : type_text(op.results.front()->type);
}

DType buffer_dtype(const Op& op) { return op.buffer ? op.buffer->dtype : DType::F32; }

std::string access_text(const Op& op) {
  return buffer_name(op.buffer) + "[" + value_list(access_indices(op)) + "]";
}

// ---------------------------------------------------------------------------------------------
// Text

std::string indentation(int indent) { return std::string(2 * static_cast<size_t>(indent), ' '); }

// The op's line without indentation, results or type: `dot %a, %b`, `store O[...], %v`.
std::string op_body_text(const Op& op) {
  switch (op.kind) {
    case OpKind::Load: {
      std::string text = "load " + access_text(op);
      if (op.has_mask) {
        text += " mask " + value_ref(access_mask(op)) + " other " +
                constant_text(op.constant, buffer_dtype(op));
      }
      return text;
    }
    case OpKind::Store: {
      std::string text = "store " + access_text(op) + ", " + value_ref(stored_value(op));
      if (op.has_mask) text += " mask " + value_ref(access_mask(op));
      return text;
    }
    case OpKind::Dot: return "dot " + value_list(op.operands);
    case OpKind::Reduce:
      return std::string("reduce ") + reduce_op_name(op.reduce_op) + " " +
             value_list(op.operands) + ", axis " + std::to_string(op.axis);
    case OpKind::Broadcast: return "broadcast " + value_list(op.operands) + ", dims " +
                                   int_list(op.dims);
    case OpKind::Permute:
      return "permute " + value_list(op.operands) + ", order " + int_list(op.dims);
    case OpKind::Iota: return "iota " + std::to_string(op.extent);
    case OpKind::Full: {
      const DType dtype =
          op.results.empty() || !op.results.front() ? DType::F32 : op.results.front()->type.dtype;
      return "full " + constant_text(op.constant, dtype);
    }
    case OpKind::Unary:
      return std::string(scalar::unary_op_name(op.unary_op)) + " " + value_list(op.operands);
    case OpKind::Binary:
      return std::string(scalar::binary_op_name(op.binary_op)) + " " + value_list(op.operands);
    case OpKind::Compare:
      return std::string("cmp ") + compare_word(op.compare_op) + " " + value_list(op.operands);
    case OpKind::Logical:
      return std::string(scalar::logical_op_name(op.logical_op)) + " " + value_list(op.operands);
    case OpKind::Select: return "select " + value_list(op.operands);
    case OpKind::Cast: return "cast " + value_list(op.operands);
    case OpKind::For: {
      return "for " + (op.loop_var ? op.loop_var->name : std::string(kNull)) + " in 0.." +
             (op.trip_count ? "min(" + std::to_string(op.extent) + ", " +
                                  value_ref(op.trip_count) + ")"
                            : std::to_string(op.extent)) +
             iter_args_text(op.block_args, op.operands);
    }
    case OpKind::Yield: return op.operands.empty() ? "yield" : "yield " + value_list(op.operands);
  }
  return kNull;
}

// One line for every op but a For, whose line opens its body.
std::string op_line(const Op& op) {
  std::string text;
  if (!op.results.empty()) text = value_list(op.results) + " = ";
  text += op_body_text(op);
  if (op.kind == OpKind::For) return text + " {";
  if (!op.results.empty()) text += " : " + result_type(op);
  return text;
}

void print_op_to(const OpPtr& op, int indent, std::string* out);

void print_region_to(const RegionPtr& region, int indent, std::string* out) {
  if (!region) {
    *out += indentation(indent) + kNull + "\n";
    return;
  }
  for (const OpPtr& op : region->ops) print_op_to(op, indent, out);
}

void print_op_to(const Op& op, int indent, std::string* out) {
  *out += indentation(indent) + op_line(op) + "\n";
  if (op.kind == OpKind::For) {
    print_region_to(op.body, indent + 1, out);
    *out += indentation(indent) + "}\n";
  }
}

void print_op_to(const OpPtr& op, int indent, std::string* out) {
  if (!op) {
    *out += indentation(indent) + kNull + "\n";
    return;
  }
  print_op_to(*op, indent, out);
}

std::string kernel_header(const Kernel& kernel) {
  std::string text = "kernel " + kernel.name + "(";
  for (size_t i = 0; i < kernel.params.size(); ++i) {
    if (i) text += ", ";
    text += buffer_name(kernel.params[i]);
  }
  text += ") grid(";
  for (size_t i = 0; i < kernel.grid.size(); ++i) {
    if (i) text += ", ";
    const GridAxis& axis = kernel.grid[i];
    text += (axis.var ? axis.var->name : kNull) + ": " + std::to_string(axis.extent);
  }
  text += ")";
  if (kernel.launch) text += " " + scalar::launch_text(*kernel.launch);
  return text;
}

// ---------------------------------------------------------------------------------------------
// DOT

class DotWriter {
 public:
  explicit DotWriter(const Module& module) : module_(module) {}

  std::string run() {
    out_ += "digraph " + dot_quote("vrtile:" + module_.name) + " {\n";
    out_ += "  graph [fontname=\"monospace\", fontsize=10];\n";
    out_ += "  node [fontname=\"monospace\", fontsize=10];\n";
    for (const std::vector<Buffer>* list : {&module_.params, &module_.allocations}) {
      for (const Buffer& buffer : *list) {
        if (buffer) write_buffer(*buffer);
      }
    }
    for (const KernelPtr& kernel : module_.kernels) {
      if (kernel) write_kernel(*kernel);
    }
    out_ += edges_;
    out_ += "}\n";
    return std::move(out_);
  }

 private:
  void write_buffer(const scalar::BufferNode& buffer) { out_ += scalar::dot_buffer_node(buffer); }

  std::string node_id(const Value& value) const {
    return dot_quote("op:" + kernel_name_ + "/" + (value ? value->name : kNull));
  }

  void write_kernel(const Kernel& kernel) {
    kernel_name_ = kernel.name;
    store_count_ = 0;
    out_ += "  subgraph " + dot_quote("cluster_" + kernel.name) + " {\n";
    out_ += "    label=" + dot_quote(kernel_header(kernel)) + ";\n";
    for (const GridAxis& axis : kernel.grid) {
      write_variable(axis.var, (axis.var ? axis.var->name : kNull) + " in 0.." +
                                   std::to_string(axis.extent) + " (grid)",
                     2);
    }
    write_region(kernel.body, 2);
    out_ += "  }\n";
  }

  void write_variable(const Value& value, const std::string& label, int indent) {
    out_ += indentation(indent) + node_id(value) + " [shape=ellipse, label=" + dot_quote(label) +
            "];\n";
  }

  static std::string typed_name(const Value& value) {
    return value ? value_ref(value) + " : " + type_text(value->type) : kNull;
  }

  void write_region(const RegionPtr& region, int indent) {
    if (!region) return;
    for (const OpPtr& op : region->ops) {
      if (op) write_op(*op, indent);
    }
  }

  void write_op(const Op& op, int indent) {
    const std::string pad = indentation(indent);
    switch (op.kind) {
      case OpKind::For: return write_for(op, indent);
      case OpKind::Yield: return;  // its values flow into the For's nodes (write_for)
      case OpKind::Store: {
        const std::string id =
            dot_quote("op:" + kernel_name_ + "/store#" + std::to_string(store_count_++));
        out_ += pad + id + " [shape=box, label=" + dot_quote(op_line(op)) + "];\n";
        add_operand_edges(op, id);
        edges_ += "  " + id + " -> " + dot_quote("buffer:" + buffer_name(op.buffer)) + ";\n";
        return;
      }
      default: {
        const Value result = op.results.empty() ? nullptr : op.results.front();
        const std::string id = node_id(result);
        out_ += pad + id + " [shape=box, label=" + dot_quote(op_line(op)) + "];\n";
        add_operand_edges(op, id);
        if (op.kind == OpKind::Load) {
          edges_ += "  " + dot_quote("buffer:" + buffer_name(op.buffer)) + " -> " + id + ";\n";
        }
        return;
      }
    }
  }

  void add_operand_edges(const Op& op, const std::string& id) {
    for (const Value& operand : op.operands) {
      if (operand) edges_ += "  " + node_id(operand) + " -> " + id + ";\n";
    }
  }

  void write_for(const Op& op, int indent) {
    const std::string pad = indentation(indent);
    const std::string loop_name = op.loop_var ? op.loop_var->name : kNull;
    out_ += pad + "subgraph " + dot_quote("cluster_" + kernel_name_ + "/" + loop_name) + " {\n";
    const std::string range =
        op.trip_count ? "min(" + std::to_string(op.extent) + ", %" + op.trip_count->name + ")"
                      : std::to_string(op.extent);
    out_ += pad + "  label=" + dot_quote("for " + loop_name + " in 0.." + range) + ";\n";
    write_variable(op.loop_var, loop_name + " in 0.." + std::to_string(op.extent), indent + 1);
    for (size_t i = 0; i < op.block_args.size(); ++i) {
      const Value& arg = op.block_args[i];
      write_variable(arg, typed_name(arg), indent + 1);
      if (i < op.operands.size() && op.operands[i] && arg) {
        edges_ += "  " + node_id(op.operands[i]) + " -> " + node_id(arg) + ";\n";
      }
    }
    write_region(op.body, indent + 1);
    out_ += pad + "}\n";

    const Op* yield = op.body && !op.body->ops.empty() && op.body->ops.back() &&
                              op.body->ops.back()->kind == OpKind::Yield
                          ? op.body->ops.back().get()
                          : nullptr;
    for (size_t i = 0; i < op.results.size(); ++i) {
      const Value& result = op.results[i];
      write_variable(result, typed_name(result), indent);
      const Value yielded = yield && i < yield->operands.size() ? yield->operands[i] : nullptr;
      if (!yielded || !result) continue;
      edges_ += "  " + node_id(yielded) + " -> " + node_id(result) + ";\n";
      if (i < op.block_args.size() && op.block_args[i]) {
        edges_ += "  " + node_id(yielded) + " -> " + node_id(op.block_args[i]) +
                  " [style=dashed, constraint=false];\n";
      }
    }
  }

  const Module& module_;
  std::string kernel_name_;
  int store_count_ = 0;
  std::string out_;
  std::string edges_;  // written after the clusters so that every node is declared in its own
};

// ---------------------------------------------------------------------------------------------
// JSON

using Json = nlohmann::ordered_json;

// JSON has no infinities or NaN: those constants are the strings the text printer uses.
Json constant_json(double value, DType dtype) {
  const double rounded = round_to(dtype, value);
  if (!std::isfinite(rounded)) return float_digits(rounded, dtype);
  if (dtype == DType::Bool) return rounded != 0.0;
  if (dtype == DType::Index && rounded >= -0x1p63 && rounded < 0x1p63) {
    return static_cast<int64_t>(rounded);
  }
  return rounded;
}

Json typed_value_json(const Value& value) {
  if (!value) return nullptr;
  return {{"name", value->name},
          {"dtype", dtype_name(value->type.dtype)},
          {"shape", shape_json(value->type.shape)}};
}

Json typed_values_json(const std::vector<Value>& values) {
  Json json = Json::array();
  for (const Value& value : values) json.push_back(typed_value_json(value));
  return json;
}

Json region_json(const RegionPtr& region);

Json op_json(const OpPtr& op_ptr) {
  if (!op_ptr) return nullptr;
  const Op& op = *op_ptr;
  Json json;
  json["kind"] = op_kind_name(op.kind);
  json["results"] = typed_values_json(op.results);
  Json operands = Json::array();
  for (const Value& operand : op.operands) {
    operands.push_back(operand ? Json(operand->name) : Json(nullptr));
  }
  json["operands"] = std::move(operands);
  switch (op.kind) {
    case OpKind::Load:
    case OpKind::Store:
      json["buffer"] = buffer_name(op.buffer);
      json["masked"] = op.has_mask;
      if (op.kind == OpKind::Load && op.has_mask) {
        json["other"] = constant_json(op.constant, buffer_dtype(op));
      }
      break;
    case OpKind::Reduce:
      json["op"] = reduce_op_name(op.reduce_op);
      json["axis"] = op.axis;
      break;
    case OpKind::Broadcast: json["dims"] = op.dims; break;
    case OpKind::Permute: json["order"] = op.dims; break;
    case OpKind::Iota: json["n"] = op.extent; break;
    case OpKind::Full:
      json["value"] = constant_json(op.constant, op.results.empty() || !op.results.front()
                                                     ? DType::F32
                                                     : op.results.front()->type.dtype);
      break;
    case OpKind::Unary: json["op"] = scalar::unary_op_name(op.unary_op); break;
    case OpKind::Binary: json["op"] = scalar::binary_op_name(op.binary_op); break;
    case OpKind::Compare: json["op"] = compare_word(op.compare_op); break;
    case OpKind::Logical: json["op"] = scalar::logical_op_name(op.logical_op); break;
    case OpKind::For:
      json["var"] = op.loop_var ? Json(op.loop_var->name) : Json(nullptr);
      json["extent"] = op.extent;
      if (op.trip_count) json["trip_count"] = op.trip_count->name;
      json["block_args"] = typed_values_json(op.block_args);
      json["body"] = region_json(op.body);
      break;
    case OpKind::Dot:
    case OpKind::Select:
    case OpKind::Cast:
    case OpKind::Yield: break;  // operands and results say everything
  }
  json["provenance"] = provenance_json(op.provenance);
  return json;
}

Json region_json(const RegionPtr& region) {
  if (!region) return nullptr;
  Json json = Json::array();
  for (const OpPtr& op : region->ops) json.push_back(op_json(op));
  return json;
}

Json kernel_json(const KernelPtr& kernel) {
  if (!kernel) return nullptr;
  Json params = Json::array();
  for (const Buffer& buffer : kernel->params) params.push_back(buffer_name(buffer));
  Json grid = Json::array();
  for (const GridAxis& axis : kernel->grid) {
    grid.push_back({{"var", axis.var ? Json(axis.var->name) : Json(nullptr)},
                    {"extent", axis.extent}});
  }
  Json json = {{"name", kernel->name},
               {"params", std::move(params)},
               {"grid", std::move(grid)},
               {"body", region_json(kernel->body)},
               {"provenance", provenance_json(kernel->provenance)}};
  if (kernel->launch) json["launch"] = scalar::launch_json(*kernel->launch);
  return json;
}

}  // namespace

std::string print_op(const Op& op, int indent) {
  std::string out;
  print_op_to(op, indent, &out);
  return out;
}

std::string op_label(const Op& op) {
  switch (op.kind) {
    case OpKind::Store: return "store " + buffer_name(op.buffer);
    case OpKind::Yield: return "yield";
    case OpKind::For: return std::string("for ") + (op.loop_var ? op.loop_var->name : kNull);
    default:
      return std::string(op_kind_name(op.kind)) + " " +
             (op.results.empty() ? std::string(kNull) : value_ref(op.results.front()));
  }
}

std::string print_kernel(const Kernel& kernel) {
  std::string out = kernel_header(kernel) + " {\n";
  print_region_to(kernel.body, 1, &out);
  return out + "}\n";
}

std::string print_module(const Module& module) {
  std::string out = "# vrtile IR: " + module.name + "\n";
  for (const Buffer& buffer : module.params) {
    out += "param " + (buffer ? buffer->name + " : " + buffer_type(*buffer) + " " +
                                    scalar::buffer_role_name(buffer->role)
                              : std::string(kNull)) +
           "\n";
  }
  for (const Buffer& buffer : module.allocations) {
    out += "alloc " + (buffer ? buffer->name + " : " + buffer_type(*buffer) : kNull) + "\n";
  }
  for (const KernelPtr& kernel : module.kernels) {
    out += "\n";
    out += kernel ? print_kernel(*kernel) : std::string(kNull) + "\n";
  }
  return out;
}

std::string module_to_dot(const Module& module) { return DotWriter(module).run(); }

nlohmann::ordered_json module_to_json(const Module& module) {
  Json kernels = Json::array();
  for (const KernelPtr& kernel : module.kernels) kernels.push_back(kernel_json(kernel));
  return {{"name", module.name},
          {"buffers", scalar::buffers_json(module.params, module.allocations)},
          {"kernels", std::move(kernels)}};
}

}  // namespace nautilus::vrtile

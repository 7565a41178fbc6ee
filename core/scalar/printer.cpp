#include "core/scalar/printer.h"

#include <cmath>
#include <string_view>
#include <vector>

#include "core/scalar/print_support.h"

namespace nautilus::scalar {
namespace {

constexpr const char* kNull = "<null>";

// ---------------------------------------------------------------------------------------------
// Numbers

// The immediate as the text printer writes it: `0.5f` for f32, `bf16(0.5)` for the others; an
// f32 infinity or NaN has no suffix. The value printed is the one the immediate denotes, i.e.
// rounded to its dtype.
std::string float_literal(double value, DType dtype) {
  const double rounded = round_to(dtype, value);
  const std::string digits = float_digits(rounded, dtype);
  if (dtype == DType::F32) return std::isfinite(rounded) ? digits + "f" : digits;
  return std::string(dtype_name(dtype)) + "(" + digits + ")";
}

// ---------------------------------------------------------------------------------------------
// Expressions, C-like precedence

enum Precedence { kOr = 1, kAnd, kCompare, kAdditive, kMultiplicative, kPrefix, kAtom };

struct Printed {
  std::string text;
  int precedence;
};

Printed print_with_precedence(const Expr& expr);

std::string wrap_if(const Printed& printed, bool parenthesize) {
  return parenthesize ? "(" + printed.text + ")" : printed.text;
}

// Left-associative infix: the right operand needs parentheses at equal precedence too, so that
// `a - (b - c)` and `a + (b + c)` keep their (rounding-relevant) grouping.
Printed infix(const Expr& a, const char* op, const Expr& b, int precedence) {
  Printed left = print_with_precedence(a), right = print_with_precedence(b);
  return {wrap_if(left, left.precedence < precedence) + " " + op + " " +
              wrap_if(right, right.precedence <= precedence),
          precedence};
}

Printed call(const std::string& function, const std::vector<Expr>& args) {
  std::string text = function + "(";
  for (size_t i = 0; i < args.size(); ++i) {
    if (i) text += ", ";
    text += print_with_precedence(args[i]).text;
  }
  return {text + ")", kAtom};
}

Printed print_binary(const Binary& node) {
  switch (node.op) {
    case BinaryOp::Add: return infix(node.a, "+", node.b, kAdditive);
    case BinaryOp::Sub: return infix(node.a, "-", node.b, kAdditive);
    case BinaryOp::Mul: return infix(node.a, "*", node.b, kMultiplicative);
    case BinaryOp::Div: return infix(node.a, "/", node.b, kMultiplicative);
    case BinaryOp::FloorDiv: return infix(node.a, "//", node.b, kMultiplicative);
    case BinaryOp::Mod: return infix(node.a, "%", node.b, kMultiplicative);
    case BinaryOp::Max: return call("max", {node.a, node.b});
    case BinaryOp::Min: return call("min", {node.a, node.b});
  }
  return {kNull, kAtom};
}

std::string index_list(const std::vector<Expr>& indices) {
  std::string text = "[";
  for (size_t i = 0; i < indices.size(); ++i) {
    if (i) text += ", ";
    text += print_with_precedence(indices[i]).text;
  }
  return text + "]";
}

std::string buffer_name(const Buffer& buffer) { return buffer ? buffer->name : kNull; }

Printed print_with_precedence(const Expr& expr) {
  if (!expr) return {kNull, kAtom};
  switch (expr->kind) {
    case ExprKind::IntImm: {
      const int64_t value = expr->as<IntImm>()->value;
      return {std::to_string(value), value < 0 ? kPrefix : kAtom};
    }
    case ExprKind::FloatImm: {
      const double value = expr->as<FloatImm>()->value;
      // A negative f32 literal reads like a negation; the call form of other dtypes is an atom.
      const bool prefix = expr->dtype == DType::F32 && std::signbit(value) && !std::isnan(value);
      return {float_literal(value, expr->dtype), prefix ? kPrefix : kAtom};
    }
    case ExprKind::VarRef: {
      const Var& var = expr->as<VarRef>()->var;
      return {var ? var->name : kNull, kAtom};
    }
    case ExprKind::Load: {
      const Load& node = *expr->as<Load>();
      return {buffer_name(node.buffer) + index_list(node.indices), kAtom};
    }
    case ExprKind::Cast: return call(dtype_name(expr->dtype), {expr->as<Cast>()->value});
    case ExprKind::Unary: {
      const Unary& node = *expr->as<Unary>();
      if (node.op == UnaryOp::Neg) {
        Printed operand = print_with_precedence(node.a);
        return {"-" + wrap_if(operand, operand.precedence <= kPrefix), kPrefix};
      }
      return call(unary_op_name(node.op), {node.a});
    }
    case ExprKind::Binary: return print_binary(*expr->as<Binary>());
    case ExprKind::Compare: {
      const Compare& node = *expr->as<Compare>();
      return infix(node.a, compare_op_name(node.op), node.b, kCompare);
    }
    case ExprKind::Logical: {
      const Logical& node = *expr->as<Logical>();
      return infix(node.a, logical_op_name(node.op), node.b,
                   node.op == LogicalOp::And ? kAnd : kOr);
    }
    case ExprKind::Select: {
      const Select& node = *expr->as<Select>();
      return call("select", {node.condition, node.if_true, node.if_false});
    }
  }
  return {kNull, kAtom};
}

// ---------------------------------------------------------------------------------------------
// Statements

std::string indentation(int indent) { return std::string(2 * static_cast<size_t>(indent), ' '); }

// `m = m, n = n; reduce d = d`: runs of iteration variables of one kind are comma-separated,
// runs are separated by `;`, and a reduce run starts with `reduce`.
std::string block_signature(const Block& block) {
  std::string text;
  for (size_t i = 0; i < block.iter_vars.size(); ++i) {
    const IterVar& iter = block.iter_vars[i];
    if (i == 0 || iter.kind != block.iter_vars[i - 1].kind) {
      if (i) text += "; ";
      if (iter.kind == IterKind::Reduce) text += "reduce ";
    } else {
      text += ", ";
    }
    text += iter.var ? iter.var->name : kNull;
    text += " = ";
    text += i < block.bindings.size() ? print_expr(block.bindings[i]) : kNull;
  }
  return text;
}

// `m_o in 0..32`, followed by ` [grid.x]` for a loop bound to the grid and by
// ` launch(warps=8, stages=2)` for the outermost loop of a nest with launch attributes.
std::string loop_header(const For& loop) {
  std::string text =
      (loop.var ? loop.var->name : kNull) + " in 0.." + std::to_string(loop.extent);
  if (is_grid(loop.for_kind)) text += std::string(" [") + for_kind_name(loop.for_kind) + "]";
  if (loop.launch) text += " " + launch_text(*loop.launch);
  return text;
}

void print_stmt_to(const Stmt& stmt, int indent, std::string* out) {
  const std::string pad = indentation(indent);
  if (!stmt) {
    *out += pad + kNull + "\n";
    return;
  }
  switch (stmt->kind) {
    case StmtKind::For: {
      const For& loop = *stmt->as<For>();
      *out += pad + "for " + loop_header(loop) + ":\n";
      print_stmt_to(loop.body, indent + 1, out);
      return;
    }
    case StmtKind::Seq:
      for (const Stmt& child : stmt->as<Seq>()->stmts) print_stmt_to(child, indent, out);
      return;
    case StmtKind::Store: {
      const Store& store = *stmt->as<Store>();
      *out += pad + buffer_name(store.buffer) + index_list(store.indices) + " = " +
              print_expr(store.value) + "\n";
      return;
    }
    case StmtKind::Block: {
      const Block& block = *stmt->as<Block>();
      *out += pad + "block " + block.name + "(" + block_signature(block) + ")";
      if (block.predicate) *out += " if " + print_expr(block.predicate);
      *out += ":\n";
      if (block.init) {
        *out += pad + "  init:\n";
        print_stmt_to(block.init, indent + 2, out);
      }
      print_stmt_to(block.body, indent + 1, out);
      return;
    }
  }
}

// The statements printed as separate top-level units: the body Seq's children, or the body.
std::vector<Stmt> top_level_statements(const Stmt& body) {
  if (body && body->kind == StmtKind::Seq) return body->as<Seq>()->stmts;
  return {body};
}

std::string_view trim(std::string_view text) {
  const size_t begin = text.find_first_not_of(" \t");
  if (begin == std::string_view::npos) return {};
  const size_t end = text.find_last_not_of(" \t");
  return text.substr(begin, end - begin + 1);
}

// ---------------------------------------------------------------------------------------------
// DOT

// One field of a record label. Besides `"` and `\`, the record syntax reserves `{ } | < >`;
// Graphviz also drops leading spaces of a field and collapses runs of spaces, so indentation is
// kept with escaped (hard) spaces. Newlines become `\l`, and a last line without one is
// left-justified too unless `centered` (for titles).
std::string record_field(std::string_view text, bool centered = false) {
  std::string field;
  bool line_start = true;
  char previous = '\0';
  for (char c : text) {
    if (c == '\n') {
      field += "\\l";
      line_start = true;
      previous = c;
      continue;
    }
    if (c == '{' || c == '}' || c == '|' || c == '<' || c == '>' || c == '"' || c == '\\') {
      field += '\\';
      field += c;
    } else if (c == ' ' && (line_start || previous == ' ')) {
      field += "\\ ";
    } else {
      field += c;
    }
    line_start = false;
    previous = c;
  }
  if (!centered && !text.empty() && text.back() != '\n') field += "\\l";
  return field;
}

// Buffers a block reads and writes, in order of first appearance, not counting nested blocks
// (they are nodes of their own).
struct BlockAccesses {
  std::vector<const BufferNode*> reads, writes;
};

void add_unique(std::vector<const BufferNode*>* list, const BufferNode* buffer) {
  for (const BufferNode* existing : *list) {
    if (existing == buffer) return;
  }
  list->push_back(buffer);
}

void collect_reads(const Expr& expr, BlockAccesses* accesses) {
  if (!expr) return;
  switch (expr->kind) {
    case ExprKind::IntImm:
    case ExprKind::FloatImm:
    case ExprKind::VarRef: return;
    case ExprKind::Load: {
      const Load& node = *expr->as<Load>();
      add_unique(&accesses->reads, node.buffer.get());
      for (const Expr& index : node.indices) collect_reads(index, accesses);
      return;
    }
    case ExprKind::Cast: return collect_reads(expr->as<Cast>()->value, accesses);
    case ExprKind::Unary: return collect_reads(expr->as<Unary>()->a, accesses);
    case ExprKind::Binary:
      collect_reads(expr->as<Binary>()->a, accesses);
      return collect_reads(expr->as<Binary>()->b, accesses);
    case ExprKind::Compare:
      collect_reads(expr->as<Compare>()->a, accesses);
      return collect_reads(expr->as<Compare>()->b, accesses);
    case ExprKind::Logical:
      collect_reads(expr->as<Logical>()->a, accesses);
      return collect_reads(expr->as<Logical>()->b, accesses);
    case ExprKind::Select:
      collect_reads(expr->as<Select>()->condition, accesses);
      collect_reads(expr->as<Select>()->if_true, accesses);
      return collect_reads(expr->as<Select>()->if_false, accesses);
  }
}

void collect_accesses(const Stmt& stmt, BlockAccesses* accesses) {
  if (!stmt) return;
  switch (stmt->kind) {
    case StmtKind::For: return collect_accesses(stmt->as<For>()->body, accesses);
    case StmtKind::Seq:
      for (const Stmt& child : stmt->as<Seq>()->stmts) collect_accesses(child, accesses);
      return;
    case StmtKind::Store: {
      const Store& store = *stmt->as<Store>();
      for (const Expr& index : store.indices) collect_reads(index, accesses);
      collect_reads(store.value, accesses);
      if (store.buffer) add_unique(&accesses->writes, store.buffer.get());
      return;
    }
    case StmtKind::Block: return;  // a nested block is its own node
  }
}

class DotWriter {
 public:
  explicit DotWriter(const Program& program) : program_(program) {}

  std::string run() {
    out_ += "digraph " + dot_quote("scalar:" + program_.name) + " {\n";
    out_ += "  graph [fontname=\"monospace\", fontsize=10];\n";
    out_ += "  node [fontname=\"monospace\", fontsize=10];\n";
    for (const std::vector<Buffer>* list : {&program_.params, &program_.allocations}) {
      for (const Buffer& buffer : *list) {
        if (buffer) write_buffer(*buffer);
      }
    }
    const std::vector<Stmt> nests = top_level_statements(program_.body);
    for (size_t i = 0; i < nests.size(); ++i) {
      out_ += "  subgraph " + dot_quote("cluster_" + std::to_string(i)) + " {\n";
      out_ += "    label=" + dot_quote(loop_label(nests[i])) + ";\n";
      write_blocks(nests[i]);
      out_ += "  }\n";
    }
    out_ += edges_;
    out_ += "}\n";
    return std::move(out_);
  }

 private:
  void write_buffer(const BufferNode& buffer) { out_ += dot_buffer_node(buffer); }

  // "for m in 0..64, n in 0..64": the perfectly nested loops at the top of a nest.
  static std::string loop_label(const Stmt& nest) {
    std::string label;
    for (Stmt stmt = nest; stmt && stmt->kind == StmtKind::For; stmt = stmt->as<For>()->body) {
      const For& loop = *stmt->as<For>();
      label += label.empty() ? "for " : ", ";
      label += loop_header(loop);
    }
    return label;
  }

  void write_blocks(const Stmt& stmt) {
    if (!stmt) return;
    switch (stmt->kind) {
      case StmtKind::For: return write_blocks(stmt->as<For>()->body);
      case StmtKind::Seq:
        for (const Stmt& child : stmt->as<Seq>()->stmts) write_blocks(child);
        return;
      case StmtKind::Store: return;
      case StmtKind::Block: {
        const Block& block = *stmt->as<Block>();
        write_block(block);
        write_blocks(block.init);
        write_blocks(block.body);
        return;
      }
    }
  }

  // A record stacked top to bottom: name | iteration variables | predicate | init | body.
  void write_block(const Block& block) {
    std::string iterators;
    for (size_t i = 0; i < block.iter_vars.size(); ++i) {
      const IterVar& iter = block.iter_vars[i];
      iterators += iter.kind == IterKind::Reduce ? "reduce " : "";
      iterators += (iter.var ? iter.var->name : kNull) + " = " +
                   (i < block.bindings.size() ? print_expr(block.bindings[i]) : kNull) +
                   " (extent " + std::to_string(iter.extent) + ")\n";
    }
    std::string label = "{" + record_field("block " + block.name, /*centered=*/true);
    if (!iterators.empty()) label += "|" + record_field(iterators);
    if (block.predicate) label += "|" + record_field("if " + print_expr(block.predicate));
    if (block.init) label += "|" + record_field("init:\n" + print_stmt(block.init, 1));
    label += "|" + record_field(print_stmt(block.body)) + "}";
    const std::string id = dot_quote("block:" + block.name);
    out_ += "    " + id + " [shape=record, label=\"" + label + "\"];\n";

    BlockAccesses accesses;
    collect_reads(block.predicate, &accesses);
    collect_accesses(block.init, &accesses);
    collect_accesses(block.body, &accesses);
    auto contains = [](const std::vector<const BufferNode*>& list, const BufferNode* buffer) {
      for (const BufferNode* existing : list) {
        if (existing == buffer) return true;
      }
      return false;
    };
    // A buffer the block both reads and writes (an accumulator) gets one two-headed edge, which
    // keeps the graph acyclic for layout.
    for (const BufferNode* read : accesses.reads) {
      if (!contains(accesses.writes, read)) {
        edges_ += "  " + dot_quote("buffer:" + read->name) + " -> " + id + ";\n";
      }
    }
    for (const BufferNode* written : accesses.writes) {
      edges_ += "  " + id + " -> " + dot_quote("buffer:" + written->name) +
                (contains(accesses.reads, written) ? " [dir=both]" : "") + ";\n";
    }
  }

  const Program& program_;
  std::string out_;
  std::string edges_;  // written after the clusters so that every node is declared first
};

// ---------------------------------------------------------------------------------------------
// JSON

using Json = nlohmann::ordered_json;

bool has_provenance(const Provenance& provenance) {
  return provenance.statement >= 0 || provenance.range.valid;
}

Json expr_json(const Expr& expr);

Json expr_list_json(const std::vector<Expr>& exprs) {
  Json json = Json::array();
  for (const Expr& expr : exprs) json.push_back(expr_json(expr));
  return json;
}

Json expr_json(const Expr& expr) {
  if (!expr) return nullptr;
  Json json;
  auto header = [&](const char* kind) {
    json["kind"] = kind;
    json["dtype"] = dtype_name(expr->dtype);
  };
  switch (expr->kind) {
    case ExprKind::IntImm:
      header("int");
      json["value"] = expr->as<IntImm>()->value;
      break;
    case ExprKind::FloatImm: {
      header("float");
      // JSON has no infinities or NaN: those values are the strings the text printer uses.
      const double value = round_to(expr->dtype, expr->as<FloatImm>()->value);
      if (std::isfinite(value)) {
        json["value"] = value;
      } else {
        json["value"] = float_digits(value, expr->dtype);
      }
      break;
    }
    case ExprKind::VarRef: {
      header("var");
      const Var& var = expr->as<VarRef>()->var;
      json["name"] = var ? var->name : kNull;
      break;
    }
    case ExprKind::Load: {
      const Load& node = *expr->as<Load>();
      header("load");
      json["buffer"] = buffer_name(node.buffer);
      json["indices"] = expr_list_json(node.indices);
      break;
    }
    case ExprKind::Cast:
      header("cast");
      json["value"] = expr_json(expr->as<Cast>()->value);
      break;
    case ExprKind::Unary:
      header("unary");
      json["op"] = unary_op_name(expr->as<Unary>()->op);
      json["a"] = expr_json(expr->as<Unary>()->a);
      break;
    case ExprKind::Binary:
      header("binary");
      json["op"] = binary_op_name(expr->as<Binary>()->op);
      json["a"] = expr_json(expr->as<Binary>()->a);
      json["b"] = expr_json(expr->as<Binary>()->b);
      break;
    case ExprKind::Compare:
      header("compare");
      json["op"] = compare_op_name(expr->as<Compare>()->op);
      json["a"] = expr_json(expr->as<Compare>()->a);
      json["b"] = expr_json(expr->as<Compare>()->b);
      break;
    case ExprKind::Logical:
      header("logical");
      json["op"] = logical_op_name(expr->as<Logical>()->op);
      json["a"] = expr_json(expr->as<Logical>()->a);
      json["b"] = expr_json(expr->as<Logical>()->b);
      break;
    case ExprKind::Select:
      header("select");
      json["condition"] = expr_json(expr->as<Select>()->condition);
      json["if_true"] = expr_json(expr->as<Select>()->if_true);
      json["if_false"] = expr_json(expr->as<Select>()->if_false);
      break;
  }
  if (has_provenance(expr->provenance)) json["provenance"] = provenance_json(expr->provenance);
  return json;
}

Json stmt_json(const Stmt& stmt) {
  if (!stmt) return nullptr;
  Json json;
  switch (stmt->kind) {
    case StmtKind::For: {
      const For& loop = *stmt->as<For>();
      json["kind"] = "for";
      json["var"] = loop.var ? loop.var->name : kNull;
      json["extent"] = loop.extent;
      json["for_kind"] = for_kind_name(loop.for_kind);
      if (loop.launch) json["launch"] = launch_json(*loop.launch);
      json["body"] = stmt_json(loop.body);
      break;
    }
    case StmtKind::Seq: {
      json["kind"] = "seq";
      Json stmts = Json::array();
      for (const Stmt& child : stmt->as<Seq>()->stmts) stmts.push_back(stmt_json(child));
      json["stmts"] = std::move(stmts);
      break;
    }
    case StmtKind::Store: {
      const Store& store = *stmt->as<Store>();
      json["kind"] = "store";
      json["buffer"] = buffer_name(store.buffer);
      json["indices"] = expr_list_json(store.indices);
      json["value"] = expr_json(store.value);
      break;
    }
    case StmtKind::Block: {
      const Block& block = *stmt->as<Block>();
      json["kind"] = "block";
      json["name"] = block.name;
      Json iter_vars = Json::array();
      for (size_t i = 0; i < block.iter_vars.size(); ++i) {
        const IterVar& iter = block.iter_vars[i];
        iter_vars.push_back(
            {{"name", iter.var ? iter.var->name : kNull},
             {"extent", iter.extent},
             {"kind", iter.kind == IterKind::Reduce ? "reduce" : "spatial"},
             {"binding", i < block.bindings.size() ? expr_json(block.bindings[i]) : nullptr}});
      }
      json["iter_vars"] = std::move(iter_vars);
      json["predicate"] = expr_json(block.predicate);
      json["init"] = stmt_json(block.init);
      json["body"] = stmt_json(block.body);
      break;
    }
  }
  json["provenance"] = provenance_json(stmt->provenance);
  return json;
}

}  // namespace

std::string shared_reads_name(SharedReads reads) {
  switch (reads) {
    case SharedReads::Auto: return "auto";
    case SharedReads::Elements: return "elements";
    case SharedReads::Grouped: return "grouped";
  }
  return "auto";
}

std::optional<SharedReads> shared_reads_from_name(const std::string& name) {
  for (SharedReads reads : {SharedReads::Auto, SharedReads::Elements, SharedReads::Grouped}) {
    if (shared_reads_name(reads) == name) return reads;
  }
  return std::nullopt;
}

std::string mma_form_name(MmaForm form) {
  switch (form) {
    case MmaForm::Auto: return "auto";
    case MmaForm::Direct: return "direct";
    case MmaForm::Swapped: return "swapped";
  }
  return "auto";
}

std::optional<MmaForm> mma_form_from_name(const std::string& name) {
  for (MmaForm form : {MmaForm::Auto, MmaForm::Direct, MmaForm::Swapped}) {
    if (mma_form_name(form) == name) return form;
  }
  return std::nullopt;
}

std::string launch_text(const LaunchAttrs& launch) {
  std::string text = "launch(warps=" + std::to_string(launch.warps) +
                     ", stages=" + std::to_string(launch.stages);
  if (launch.consumers) text += ", consumers=" + std::to_string(launch.consumers);
  if (launch.early_stages) text += ", early_stages=" + std::to_string(launch.early_stages);
  if (launch.overlap) text += ", overlap";
  if (launch.pingpong) text += ", pingpong";
  if (launch.group > 1) text += ", group=" + std::to_string(launch.group);
  for (const std::string& loop : launch.reversed) text += ", reverse=" + loop;
  if (launch.persistent) text += launch.dynamic_tiles ? ", persistent(dynamic)" : ", persistent(static)";
  if (launch.shared_reads != SharedReads::Auto) text += ", reads=" + shared_reads_name(launch.shared_reads);
  if (launch.mma_form != MmaForm::Auto) text += ", mma=" + mma_form_name(launch.mma_form);
  return text + ")";
}

nlohmann::ordered_json launch_json(const LaunchAttrs& launch) {
  nlohmann::ordered_json json = {{"warps", launch.warps}, {"stages", launch.stages}};
  if (launch.consumers) json["consumers"] = launch.consumers;
  if (launch.early_stages) json["early_stages"] = launch.early_stages;
  if (launch.overlap) json["overlap"] = true;
  if (launch.pingpong) json["pingpong"] = true;
  if (launch.group > 1) json["group"] = launch.group;
  if (launch.shared_reads != SharedReads::Auto) json["reads"] = shared_reads_name(launch.shared_reads);
  if (launch.mma_form != MmaForm::Auto) json["mma"] = mma_form_name(launch.mma_form);
  if (!launch.reversed.empty()) json["reversed"] = launch.reversed;
  if (launch.persistent) {
    json["persistent"] = true;
    json["scheduler"] = launch.dynamic_tiles ? "dynamic" : "static";
  }
  return json;
}

std::string print_expr(const Expr& expr) { return print_with_precedence(expr).text; }

std::string print_stmt(const Stmt& stmt, int indent) {
  std::string out;
  print_stmt_to(stmt, indent, &out);
  return out;
}

std::string print_program(const Program& program, const SourceFile* source) {
  std::string out = "# scalar IR: " + program.name + "\n";
  for (const Buffer& buffer : program.params) {
    if (!buffer) {
      out += std::string("param ") + kNull + "\n";
      continue;
    }
    out += "param " + buffer->name + " : " + buffer_type(*buffer) + " " +
           buffer_role_name(buffer->role) + "\n";
  }
  for (const Buffer& buffer : program.allocations) {
    out += "alloc " + (buffer ? buffer->name + " : " + buffer_type(*buffer) : kNull) + "\n";
  }
  for (const Stmt& stmt : top_level_statements(program.body)) {
    out += "\n";
    if (source && stmt && stmt->provenance.range.valid) {
      // The source of the nest: the whole statement, or for a reduction extracted from inside an
      // expression, just that reduction, with its column so it can be found in a long line.
      const LineColumn where = source->line_column(stmt->provenance.range.begin);
      const std::string_view line_text = source->line_text(where.line);
      const std::string_view trimmed = trim(line_text);
      const bool whole_line =
          where.column - 1 <= static_cast<uint32_t>(trimmed.data() - line_text.data());
      std::string location = "line " + std::to_string(where.line);
      std::string_view shown = trimmed;
      if (!whole_line) {
        shown = trim(source->slice(stmt->provenance.range));
        location += ", column " + std::to_string(where.column);
      }
      out += "# " + std::string(shown) + "   (" + location + ")\n";
    }
    print_stmt_to(stmt, 0, &out);
  }
  return out;
}

std::string program_to_dot(const Program& program) { return DotWriter(program).run(); }

nlohmann::ordered_json program_to_json(const Program& program) {
  return {{"name", program.name},
          {"buffers", buffers_json(program.params, program.allocations)},
          {"body", stmt_json(program.body)}};
}

}  // namespace nautilus::scalar

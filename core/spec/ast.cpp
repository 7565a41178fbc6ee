#include "core/spec/ast.h"

#include <array>

namespace nautilus::spec {

namespace {

constexpr std::array<Func, 11> kAllFuncs = {Func::Exp,  Func::Exp2,    Func::Log, Func::Log2,
                                            Func::Sqrt, Func::Rsqrt,   Func::Tanh, Func::Sigmoid,
                                            Func::Abs,  Func::Max,     Func::Min};

}  // namespace

const char* compare_op_text(CompareOp op) {
  switch (op) {
    case CompareOp::Less: return "<";
    case CompareOp::LessEqual: return "<=";
    case CompareOp::Greater: return ">";
    case CompareOp::GreaterEqual: return ">=";
    case CompareOp::Equal: return "==";
    case CompareOp::NotEqual: return "!=";
  }
  return "?";
}

const char* binary_op_text(BinaryOp op) {
  switch (op) {
    case BinaryOp::Add: return "+";
    case BinaryOp::Sub: return "-";
    case BinaryOp::Mul: return "*";
    case BinaryOp::Div: return "/";
  }
  return "?";
}

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::Sum: return "sum";
    case ReduceOp::Max: return "max";
    case ReduceOp::Min: return "min";
  }
  return "?";
}

const char* func_name(Func func) {
  switch (func) {
    case Func::Exp: return "exp";
    case Func::Exp2: return "exp2";
    case Func::Log: return "log";
    case Func::Log2: return "log2";
    case Func::Sqrt: return "sqrt";
    case Func::Rsqrt: return "rsqrt";
    case Func::Tanh: return "tanh";
    case Func::Sigmoid: return "sigmoid";
    case Func::Abs: return "abs";
    case Func::Max: return "max";
    case Func::Min: return "min";
  }
  return "?";
}

int func_arity(Func func) { return func == Func::Max || func == Func::Min ? 2 : 1; }

std::optional<Func> find_func(std::string_view name) {
  for (Func func : kAllFuncs) {
    if (name == func_name(func)) return func;
  }
  return std::nullopt;
}

std::string func_name_list() {
  std::string list;
  for (Func func : kAllFuncs) {
    if (!list.empty()) list += ", ";
    list += func_name(func);
  }
  return list;
}

const char* tensor_role_name(TensorRole role) {
  switch (role) {
    case TensorRole::Input: return "input";
    case TensorRole::Intermediate: return "intermediate";
    case TensorRole::Output: return "output";
  }
  return "?";
}

int Spec::find_tensor(const std::string& tensor_name) const {
  for (size_t i = 0; i < tensors.size(); ++i) {
    if (tensors[i].name == tensor_name) return static_cast<int>(i);
  }
  return -1;
}

}  // namespace nautilus::spec

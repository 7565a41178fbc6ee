// Random spec text per category (spec_generator.h says what and why). Every builder below keeps
// two invariants the reference comparison needs: values stay bounded (so no stage overflows
// where the float64 reference does not), and a -inf mask never masks a whole row.
#include "tools/difftest/spec_generator.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <sstream>
#include <utility>

namespace nautilus::difftest {
namespace {

std::string join(const std::vector<std::string>& parts, const std::string& separator) {
  std::string out;
  for (size_t i = 0; i < parts.size(); ++i) {
    if (i) out += separator;
    out += parts[i];
  }
  return out;
}

std::string num(double value) {
  std::ostringstream out;
  out << value;
  std::string text = out.str();
  if (text.find_first_of(".e") == std::string::npos) text += ".0";
  return text;
}

// A value expression with a bound on its magnitude (inputs are in [-1, 1)).
struct Value {
  std::string text;
  double bound = 1.0;
};

// `value` with `leaf` in it: every index variable of a statement must index a dimension by
// itself somewhere, and the full-rank leaf is what does.
Value with_leaf(Value value, const std::string& leaf) {
  if (value.text.find(leaf) != std::string::npos) return value;
  return {leaf + " + " + value.text, value.bound + 1.0};
}

// A mask over a (row, column) pair of index variables: its text and its predicate.
struct Mask {
  std::string text;
  std::function<bool(int64_t, int64_t)> keep;
};

class Builder {
 public:
  Builder(Rng& rng, const GeneratorOptions& options) : rng_(rng), options_(options) {}

  Rng& rng() { return rng_; }

  // Binds a size symbol in the `let` line; returns its value.
  int64_t let(const std::string& name, int64_t value) {
    lets_.emplace_back(name, value);
    return value;
  }
  int64_t size_of(const std::string& name) const {
    for (const auto& [n, v] : lets_) {
      if (n == name) return v;
    }
    return -1;
  }
  // 1..24 with non-powers of two, powers of two and sizes just above them (partial tiles).
  int64_t random_extent(int64_t lo = 1, int64_t hi = 24) {
    if (options_.tensor_core_sizes && hi >= 24) return rng_.pick(std::vector<int64_t>{64, 72, 128, 136});
    static const std::vector<int64_t> favourites = {1, 2, 3, 4, 5, 7, 8, 9, 12, 13, 16, 17, 20, 24};
    int64_t value = rng_.chance(0.5) ? rng_.pick(favourites) : rng_.range(lo, hi);
    return std::clamp(value, lo, hi);
  }
  std::string dtype() {
    if (options_.tensor_core_sizes) return rng_.pick({"f16", "bf16"});
    return rng_.pick({"f32", "f32", "f16", "bf16"});
  }
  void input(const std::string& name, const std::vector<std::string>& dims, const std::string& dt) {
    input_dtypes_.push_back(dt);
    lines_.push_back("input " + name + "[" + join(dims, ", ") + "] : " + dt);
  }
  void line(const std::string& text) { lines_.push_back(text); }

  std::string text(const std::string& category) const {
    std::string out = "# difftest: " + category + "\n";
    if (!lets_.empty()) {
      std::vector<std::string> bindings;
      for (const auto& [n, v] : lets_) bindings.push_back(n + " = " + std::to_string(v));
      out += "let " + join(bindings, ", ") + "\n";
    }
    for (const std::string& l : lines_) out += l + "\n";
    return out;
  }

  // An intermediate of dtype `dt` is stored rounded to it by every stage and by the float64
  // reference, but a value computed in f32 and the same value computed in float64 can round to
  // neighbouring 16-bit values near a rounding midpoint, a difference the f32 tolerance does
  // not cover: an output computed from a narrow intermediate gets a dtype whose tolerance does.
  void narrow_intermediate(const std::string& dt) {
    if (dt == "bf16" || (dt == "f16" && floor_.empty())) floor_ = dt;
  }
  // sema keeps a narrow dtype for an intermediate without reduction whose operands share it:
  // assume it for every narrow input dtype so far (conservative).
  void narrow_from_inputs() {
    for (const std::string& dt : input_dtypes_) narrow_intermediate(dt);
  }
  // A contraction (a dot after tilize) of 16-bit inputs: its output is 16-bit unless
  // `strict_f32`, the common case, in which narrow-dot-operands rounds a computed f32 operand to
  // 16 bits (rewrite/operand_narrowing.h; for an f32 output the dot stays f32).
  void contraction_of_inputs() {
    if (!options_.strict_f32) narrow_from_inputs();
  }
  // An output dtype annotation (" : f16") or none (f32 by default).
  std::string output_dtype() {
    if (floor_ == "bf16") return " : bf16";
    if (floor_ == "f16") return rng_.chance(0.5) ? " : f16" : " : bf16";
    if (rng_.chance(0.3)) return "";
    return " : " + dtype();
  }

  // A mask on (m, n) with extents (M, N); when `every_row` every row m keeps some n.
  Mask mask(const std::string& m, const std::string& n, int64_t M, int64_t N, bool every_row) {
    for (int attempt = 0; attempt < 12; ++attempt) {
      Mask candidate = any_mask(m, n, M, N);
      if (!every_row || keeps_every_row(candidate, M, N)) return candidate;
    }
    return {n + " <= " + m, [](int64_t r, int64_t c) { return c <= r; }};
  }

  // Bounded element-wise expression over `leaves` (each of magnitude <= 1), of depth <= depth.
  Value expression(const std::vector<Value>& leaves, int depth,
                   const std::vector<std::pair<std::string, int64_t>>& vars) {
    if (depth <= 0 || rng_.chance(0.25)) {
      if (rng_.chance(0.12)) return {num(rng_.pick(std::vector<double>{0.5, 2.0, 0.25, 1.5, 3.0})),
                                     3.0};
      if (!vars.empty() && rng_.chance(0.1)) {
        const auto& [var, extent] = rng_.pick(vars);
        return {"0.05 * " + var, 0.05 * static_cast<double>(extent)};
      }
      return rng_.pick(leaves);
    }
    const int choice = static_cast<int>(rng_.range(0, 21));
    Value a = expression(leaves, depth - 1, vars);
    const auto binary = [&]() { return expression(leaves, depth - 1, vars); };
    Value out;
    switch (choice) {
      case 0: out = {"tanh(" + a.text + ")", 1.0}; break;
      case 1: out = {"sigmoid(" + a.text + ")", 1.0}; break;
      case 2: out = {"exp(-abs(" + a.text + "))", 1.0}; break;
      case 3:
        if (a.bound <= 4) {
          out = {"exp(" + a.text + ")", std::exp(a.bound)};
        } else {
          out = {"exp(tanh(" + a.text + "))", 2.72};
        }
        break;
      case 4: out = {"abs(" + a.text + ")", a.bound}; break;
      case 5: out = {"-(" + a.text + ")", a.bound}; break;
      case 6: out = {"(" + a.text + ") * (" + a.text + ")", a.bound * a.bound}; break;
      case 7: out = {"max(" + a.text + ", 0)", a.bound}; break;
      case 8: out = {"min(" + a.text + ", 0.5)", a.bound}; break;
      case 9: out = {"sqrt(abs(" + a.text + "))", std::sqrt(a.bound)}; break;
      case 10: out = {"rsqrt(abs(" + a.text + ") + 1)", 1.0}; break;
      case 11: out = {"log(1 + abs(" + a.text + "))", std::log1p(a.bound)}; break;
      case 12:
        if (a.bound <= 4) {
          out = {"exp2(" + a.text + ")", std::exp2(a.bound)};
        } else {
          out = {"tanh(" + a.text + ")", 1.0};
        }
        break;
      case 13: out = {"log2(2 + abs(" + a.text + "))", std::log2(2 + a.bound)}; break;
      case 14: {
        Value b = binary();
        out = {a.text + " + " + b.text, a.bound + b.bound};
        break;
      }
      case 15: {
        Value b = binary();
        out = {a.text + " - (" + b.text + ")", a.bound + b.bound};
        break;
      }
      case 16: {
        Value b = binary();
        out = {"(" + a.text + ") * (" + b.text + ")", a.bound * b.bound};
        break;
      }
      case 17: {
        Value b = binary();
        out = {"max(" + a.text + ", " + b.text + ")", std::max(a.bound, b.bound)};
        break;
      }
      case 18: {
        Value b = binary();
        out = {"min(" + a.text + ", " + b.text + ")", std::max(a.bound, b.bound)};
        break;
      }
      case 19: {
        Value b = binary();
        out = {"(" + a.text + ") / (2 + abs(" + b.text + "))", a.bound / 2};
        break;
      }
      case 20: {
        if (vars.size() >= 2) {
          Value b = binary();
          const auto& [row, row_extent] = vars[0];
          const auto& [col, col_extent] = vars[1];
          Mask m = mask(row, col, row_extent, col_extent, false);
          out = {"select(" + m.text + ", " + a.text + ", " + b.text + ")",
                 std::max(a.bound, b.bound)};
        } else {
          out = {"0.5 * (" + a.text + ")", a.bound / 2};
        }
        break;
      }
      default: out = {"0.5 * (" + a.text + ")", a.bound / 2}; break;
    }
    if (out.bound > 30) out = {"tanh(" + out.text + ")", 1.0};
    return out;
  }

  // A score function of attention and softmax: s bounded by about `bound`.
  std::string score_function(const std::string& s) {
    switch (rng_.range(0, 6)) {
      case 0: return s;
      case 1: return num(rng_.pick(std::vector<double>{0.5, 2.0, 0.125, 1.4427})) + " * " + s;
      case 2: {
        const std::string cap = num(rng_.pick(std::vector<double>{1.0, 5.0, 30.0}));
        return cap + " * tanh(" + s + " / " + cap + ")";
      }
      case 3: return "tanh(" + s + ")";
      case 4: return s + " * sigmoid(" + s + ")";
      case 5: return "max(" + s + ", -1)";
      default: return s + " / 0.7";
    }
  }

 private:
  static bool keeps_every_row(const Mask& mask, int64_t M, int64_t N) {
    for (int64_t r = 0; r < M; ++r) {
      bool any = false;
      for (int64_t c = 0; c < N && !any; ++c) any = mask.keep(r, c);
      if (!any) return false;
    }
    return true;
  }

  // A fresh size symbol name (W, W2, ...).
  std::string symbol(const std::string& base) {
    std::string name = base;
    for (int i = 2; size_of(name) >= 0; ++i) name = base + std::to_string(i);
    return name;
  }

  Mask any_mask(const std::string& m, const std::string& n, int64_t M, int64_t N) {
    switch (rng_.range(0, 10)) {
      case 0:
      case 1: return {n + " <= " + m, [](int64_t r, int64_t c) { return c <= r; }};
      case 2: {
        const int64_t offset = rng_.range(1, 3);
        return {n + " <= " + m + " + " + std::to_string(offset),
                [offset](int64_t r, int64_t c) { return c <= r + offset; }};
      }
      case 3: {
        const std::string w = symbol("Win");
        const int64_t W = let(w, rng_.range(1, 8));
        return {n + " <= " + m + " and " + m + " - " + n + " < " + w,
                [W](int64_t r, int64_t c) { return c <= r && r - c < W; }};
      }
      case 4: {
        const std::string w = symbol("Win");
        const int64_t W = let(w, rng_.range(1, 6));
        return {m + " - " + n + " < " + w + " and " + n + " - " + m + " < " + w,
                [W](int64_t r, int64_t c) { return r - c < W && c - r < W; }};
      }
      case 5: {
        const std::string p = symbol("Pre");
        const int64_t P = let(p, rng_.range(1, std::max<int64_t>(1, N)));
        return {n + " <= " + m + " or " + n + " < " + p,
                [P](int64_t r, int64_t c) { return c <= r || c < P; }};
      }
      case 6: {
        const std::string d = symbol("Doc");
        const int64_t Doc = let(d, rng_.range(1, 8));
        if (rng_.chance(0.5)) {
          return {m + " / " + d + " == " + n + " / " + d + " and " + n + " <= " + m,
                  [Doc](int64_t r, int64_t c) { return r / Doc == c / Doc && c <= r; }};
        }
        return {m + " / " + d + " == " + n + " / " + d,
                [Doc](int64_t r, int64_t c) { return r / Doc == c / Doc; }};
      }
      case 7: {
        const int64_t L = rng_.range(1, std::max<int64_t>(1, N));
        return {n + " < " + std::to_string(L), [L](int64_t, int64_t c) { return c < L; }};
      }
      case 8: return {n + " % 2 == 0 or " + n + " <= " + m,
                      [](int64_t r, int64_t c) { return c % 2 == 0 || c <= r; }};
      case 9: return {n + " >= " + m, [](int64_t r, int64_t c) { return c >= r; }};
      default: {
        (void)M;
        return {m + " != " + n, [](int64_t r, int64_t c) { return r != c; }};
      }
    }
  }

  Rng& rng_;
  GeneratorOptions options_;
  std::vector<std::pair<std::string, int64_t>> lets_;
  std::vector<std::string> lines_;
  std::vector<std::string> input_dtypes_;
  std::string floor_;  // the narrowest intermediate dtype ("" none)
};

// ---- categories --------------------------------------------------------------------------

GeneratedSpec elementwise(Rng& rng, const GeneratorOptions& options) {
  Builder b(rng, options);
  const int rank = static_cast<int>(rng.range(1, 3));
  const std::vector<std::string> names = {"I", "J", "L"}, vars = {"i", "j", "l"};
  std::vector<std::pair<std::string, int64_t>> index_vars;
  std::vector<std::string> dims, idx;
  for (int r = 0; r < rank; ++r) {
    index_vars.emplace_back(vars[r], b.let(names[r], b.random_extent()));
    dims.push_back(names[r]);
    idx.push_back(vars[r]);
  }
  const std::string dt = b.dtype();
  const bool mixed = rng.chance(0.3);
  std::vector<Value> leaves;
  b.input("X", dims, dt);
  leaves.push_back({"X[" + join(idx, ", ") + "]", 1.0});
  // A broadcast input over the last dimension.
  if (rng.chance(0.6)) {
    b.input("Bv", {dims.back()}, mixed ? b.dtype() : dt);
    leaves.push_back({"Bv[" + idx.back() + "]", 1.0});
  }
  // Index arithmetic on the first dimension.
  if (rng.chance(0.6)) {
    const int64_t first = index_vars[0].second;
    std::vector<std::string> zdims = dims, zidx = idx;
    switch (rng.range(0, 2)) {
      case 0:
        zdims[0] = std::to_string((first + 1) / 2);
        zidx[0] = idx[0] + " / 2";
        break;
      case 1:
        zidx[0] = names[0] + " - 1 - " + idx[0];
        break;
      default:
        zdims[0] = "3";
        zidx[0] = idx[0] + " % 3";
        break;
    }
    b.input("Z", zdims, mixed ? b.dtype() : dt);
    leaves.push_back({"Z[" + join(zidx, ", ") + "]", 1.0});
  }
  const std::string lhs = "[" + join(idx, ", ") + "]";
  if (rng.chance(0.4)) {
    Value t = with_leaf(b.expression(leaves, 2, index_vars), leaves.front().text);
    std::string annot = rng.chance(0.2) ? " : " + b.dtype() : "";
    if (annot.empty()) {
      b.narrow_from_inputs();
    } else {
      b.narrow_intermediate(annot.substr(3));
    }
    b.line("T" + lhs + annot + " = " + t.text);
    leaves.push_back({"T" + lhs, 1.0});
    if (t.bound > 1.0) leaves.back() = {"tanh(T" + lhs + ")", 1.0};
  }
  Value y = with_leaf(b.expression(leaves, 3, index_vars), leaves.front().text);
  b.line("output Y" + lhs + b.output_dtype() + " = " + y.text);
  return {"elementwise", b.text("elementwise")};
}

// One reduction; `identity` of each reducer for masked entries.
std::string identity(const std::string& reducer) {
  if (reducer == "sum") return "0";
  if (reducer == "max") return "-inf";
  return "inf";
}

GeneratedSpec reduction(Rng& rng, const GeneratorOptions& options) {
  Builder b(rng, options);
  const bool batch = rng.chance(0.3);
  const bool two_axes = rng.chance(0.3);
  const bool columns = !two_axes && rng.chance(0.25);
  const int64_t I = b.let("I", b.random_extent());
  const int64_t J = b.let("J", b.random_extent());
  int64_t L = 0;
  if (two_axes) L = b.let("L", b.random_extent(1, 12));
  if (batch) b.let("B", b.random_extent(1, 4));
  const std::string dt = b.dtype();
  std::vector<std::string> dims, idx;
  if (batch) {
    dims.push_back("B");
    idx.push_back("b");
  }
  dims.insert(dims.end(), {"I", "J"});
  idx.insert(idx.end(), {"i", "j"});
  if (two_axes) {
    dims.push_back("L");
    idx.push_back("l");
  }
  b.input("X", dims, dt);
  std::vector<Value> leaves = {{"X[" + join(idx, ", ") + "]", 1.0}};
  if (rng.chance(0.5)) {
    b.input("W", two_axes ? std::vector<std::string>{"J", "L"} : std::vector<std::string>{"J"},
            rng.chance(0.3) ? b.dtype() : dt);
    leaves.push_back({two_axes ? "W[j, l]" : "W[j]", 1.0});
  }
  const std::string reducer = rng.pick({"sum", "sum", "max", "min"});
  // The reduced variables and the kept ones.
  std::string reduced = columns ? "i" : "j";
  if (two_axes) reduced = rng.chance(0.5) ? "j, l" : "l, j";
  std::vector<std::string> kept;
  if (batch) kept.push_back("b");
  kept.push_back(columns ? "j" : "i");
  std::vector<std::pair<std::string, int64_t>> vars = {{"i", I}, {"j", J}};
  b.contraction_of_inputs();
  Value body = with_leaf(b.expression(leaves, 2, vars), leaves.front().text);
  std::string term = body.text;
  if (rng.chance(0.5)) {
    // Masked with the reducer's identity; max/min rows must keep an entry (columns: the
    // reduced variable is i, rows are j).
    const bool every_row = reducer != "sum";
    Mask m = columns ? b.mask("j", "i", J, I, every_row) : b.mask("i", "j", I, J, every_row);
    term = "select(" + m.text + ", " + body.text + ", " + identity(reducer) + ")";
  }
  (void)L;
  const std::string kept_idx = "[" + join(kept, ", ") + "]";
  // A body that starts with '-' needs parentheses after the reduction's variables.
  if (term.front() == '-') term = "(" + term + ")";
  const std::string red = reducer + "(" + reduced + ") " + term;
  switch (rng.range(0, 3)) {
    case 0: b.line("output Y" + kept_idx + b.output_dtype() + " = " + red); break;
    case 1:
      // An epilogue on the reduced value (bounded: the sum has at most 24 * 12 terms).
      b.line("R" + kept_idx + " = " + red);
      b.line("output Y" + kept_idx + b.output_dtype() + " = tanh(R" + kept_idx + " / 4) + 0.5");
      break;
    case 2:
      if (!two_axes) {
        // Broadcast back over the reduced axis.
        b.line("R" + kept_idx + " = " + red);
        b.line("output Y[" + join(idx, ", ") + "]" + b.output_dtype() + " = X[" + join(idx, ", ") +
               "] - tanh(R" + kept_idx + ")");
        break;
      }
      [[fallthrough]];
    default:
      b.line("output Y" + kept_idx + b.output_dtype() + " = (" + red + ") * 0.5 + 1");
      break;
  }
  return {"reduction", b.text("reduction")};
}

GeneratedSpec softmax(Rng& rng, const GeneratorOptions& options) {
  Builder b(rng, options);
  const bool batch = rng.chance(0.3);
  const int64_t R = b.let("R", b.random_extent());
  const int64_t C = b.let("C", b.random_extent());
  if (batch) b.let("B", b.random_extent(1, 3));
  const std::string dt = b.dtype();
  const std::string pre = batch ? "b, " : "";
  const std::string dims = batch ? "B, R, C" : "R, C";
  b.input("X", {dims}, dt);
  const auto at = [&](const std::string& c) { return "[" + pre + "r, " + c + "]"; };
  const std::string row = "[" + pre + "r]";
  // The scores S: a score function of X, maybe a bias, maybe masked with -inf.
  std::string s = b.score_function("X" + at("c"));
  if (rng.chance(0.3)) {
    b.input("Bias", {"C"}, rng.chance(0.5) ? dt : "f32");
    s = s + " + Bias[c]";
  }
  if (rng.chance(0.5)) {
    Mask m = b.mask("r", "c", R, C, true);
    s = "select(" + m.text + ", " + s + ", -inf)";
  }
  b.line("S" + at("c") + " = " + s);
  b.narrow_from_inputs();
  const std::string od = b.output_dtype();
  switch (rng.range(0, 5)) {
    case 0:
      b.line("Mx" + row + " = max(c) S" + at("c"));
      b.line("E" + at("c") + " = exp(S" + at("c") + " - Mx" + row + ")");
      b.line("Lsum" + row + " = sum(c) E" + at("c"));
      b.line("output Y" + at("c") + od + " = E" + at("c") + " / Lsum" + row);
      break;
    case 1:
      b.line("Mx" + row + " = max(c) S" + at("c"));
      b.line("E" + at("c") + " = exp(S" + at("c") + " - Mx" + row + ")");
      b.line("output Y" + at("c") + od + " = E" + at("c") + " / sum(c2) E" + at("c2"));
      break;
    case 2:
      b.line("Mx" + row + " = max(c) S" + at("c"));
      b.line("output Y" + row + od + " = Mx" + row + " + log(sum(c) exp(S" + at("c") + " - Mx" +
             row + "))");
      break;
    case 3:
      b.line("output Y" + at("c") + od + " = exp(S" + at("c") + " - max(c2) S" + at("c2") +
             ") / sum(c3) exp(S" + at("c3") + " - max(c4) S" + at("c4") + ")");
      break;
    case 4: {
      // Cross-entropy against soft targets (the masked scores are -inf: targets read X).
      b.input("Tg", {dims}, dt);
      b.line("Mx" + row + " = max(c) S" + at("c"));
      b.line("output Y" + row + od + " = Mx" + row + " + log(sum(c) exp(S" + at("c") + " - Mx" +
             row + ")) - sum(c2) Tg" + at("c2") + " * X" + at("c2"));
      break;
    }
    default:
      // Softmax with temperature, written with an inline max.
      b.line("E" + at("c") + " = exp((S" + at("c") + " - max(c2) S" + at("c2") + ") / 0.8)");
      b.line("output Y" + at("c") + od + " = E" + at("c") + " / sum(c3) E" + at("c3"));
      break;
  }
  return {"softmax", b.text("softmax")};
}

GeneratedSpec attention(Rng& rng, const GeneratorOptions& options) {
  Builder b(rng, options);
  const bool decode = rng.chance(0.15);
  const bool has_b = rng.chance(0.5);
  const bool has_h = rng.chance(0.7) || (decode && !has_b);  // decode keeps a row dimension
  const bool gqa = has_h && rng.chance(0.4);
  if (has_b) b.let("B", b.random_extent(1, 2));
  int64_t G = 1;
  if (has_h) {
    if (gqa) {
      const int64_t kh = b.let("KH", rng.range(1, 3));
      G = rng.range(2, 3);
      b.let("H", kh * G);
    } else {
      b.let("H", rng.range(1, 3));
    }
  }
  const int64_t M = decode ? 1 : b.let("M", b.random_extent());
  const int64_t N = b.let("N", b.random_extent());
  b.let("D", b.random_extent(1, 24));
  const bool own_dv = rng.chance(0.3);
  if (own_dv) b.let("Dv", b.random_extent(1, 24));
  const std::string dt = b.dtype();
  std::vector<std::string> pre_dims, pre_idx, kv_dims, kv_idx;
  if (has_b) {
    pre_dims.push_back("B");
    pre_idx.push_back("b");
    kv_dims.push_back("B");
    kv_idx.push_back("b");
  }
  if (has_h) {
    pre_dims.push_back("H");
    pre_idx.push_back("h");
    kv_dims.push_back(gqa ? "KH" : "H");
    kv_idx.push_back(gqa ? "h / " + std::to_string(G) : "h");
  }
  const auto with = [](std::vector<std::string> v, std::initializer_list<std::string> more) {
    v.insert(v.end(), more);
    return v;
  };
  const std::string dv = own_dv ? "Dv" : "D";
  b.input("Q", decode ? with(pre_dims, {"D"}) : with(pre_dims, {"M", "D"}), dt);
  b.input("K", with(kv_dims, {"N", "D"}), dt);
  b.input("V", with(kv_dims, {"N", dv}), dt);
  const auto idx = [&](std::initializer_list<std::string> more) {
    return "[" + join(with(pre_idx, more), ", ") + "]";
  };
  const auto kv = [&](std::initializer_list<std::string> more) {
    return "[" + join(with(kv_idx, more), ", ") + "]";
  };
  const std::string q = decode ? idx({"d"}) : idx({"m", "d"});
  const std::string row = decode ? idx({}) : idx({"m"});
  const auto s_at = [&](const std::string& n) { return decode ? idx({n}) : idx({"m", n}); };
  std::string dot = "(sum(d) Q" + q + " * K" + kv({"n", "d"}) + ")";
  dot = rng.chance(0.7) ? dot + " / sqrt(D)" : dot + " * 0.25";
  std::string s = b.score_function(dot);
  if (rng.chance(0.3)) {
    if (decode) {
      b.input("Bias", {"N"}, dt);
      s += " + Bias[n]";
    } else if (has_h && rng.chance(0.5)) {
      b.input("Bias", {"H", "M", "N"}, dt);
      s += " + Bias[h, m, n]";
    } else {
      b.input("Bias", {"M", "N"}, rng.chance(0.5) ? dt : "f32");
      s += " + Bias[m, n]";
    }
  }
  if (!decode && rng.chance(0.25)) {
    if (has_h) {
      b.input("Slope", {"H"}, "f32");
      s += " - Slope[h] * (m - n) * 0.1";
    } else {
      s += " - 0.05 * (m - n)";
    }
  }
  if (!decode && rng.chance(0.6)) {
    Mask m = b.mask("m", "n", M, N, true);
    s = "select(" + m.text + ", " + s + ", -inf)";
  }
  b.contraction_of_inputs();
  std::string od = b.output_dtype();
  const std::string out = decode ? idx({"e"}) : idx({"m", "e"});
  const std::string v = "V" + kv({"n", "e"});
  // D and Dv: output index e ranges over V's last dim.
  switch (rng.range(0, 3)) {
    case 0:  // separate statements
      b.line("S" + s_at("n") + " = " + s);
      b.line("Mx" + row + " = max(n) S" + s_at("n"));
      b.line("P" + s_at("n") + " = exp(S" + s_at("n") + " - Mx" + row + ")");
      b.line("Lsum" + row + " = sum(n) P" + s_at("n"));
      b.line("output O" + out + od + " = sum(n) P" + s_at("n") + " * " + v + " / Lsum" + row);
      break;
    case 1:  // inline normalizer
      b.line("S" + s_at("n") + " = " + s);
      b.line("Mx" + row + " = max(n) S" + s_at("n"));
      b.line("P" + s_at("n") + " = exp(S" + s_at("n") + " - Mx" + row + ")");
      b.line("output O" + out + od + " = (sum(n) P" + s_at("n") + " * " + v + ") / (sum(n2) P" +
             s_at("n2") + ")");
      break;
    case 2:  // scores as their own statement, the rest in one
      b.line("S" + s_at("n") + " = " + s);
      b.line("output O" + out + od + " = (sum(n) exp(S" + s_at("n") + " - max(n2) S" + s_at("n2") +
             ") * " + v + ") / sum(n3) exp(S" + s_at("n3") + " - max(n4) S" + s_at("n4") + ")");
      break;
    default:  // P materialized with a dtype, Mx inline
      b.line("S" + s_at("n") + " = " + s);
      const bool declared = dt != "f32" && rng.chance(0.5);
      if (declared) {
        b.narrow_intermediate(dt);
        od = b.output_dtype();
      }
      b.line("P" + s_at("n") + (declared ? " : " + dt : "") + " = exp(S" + s_at("n") +
             " - max(n2) S" + s_at("n2") + ")");
      b.line("output O" + out + od + " = sum(n) P" + s_at("n") + " * " + v + " / sum(n3) P" +
             s_at("n3"));
      break;
  }
  return {"attention", b.text("attention")};
}

std::string activation(Rng& rng, const std::string& z) {
  switch (rng.range(0, 6)) {
    case 0: return z;
    case 1: return "max(" + z + ", 0)";
    case 2:
      return "0.5 * " + z + " * (1 + tanh(0.7978845608028654 * (" + z + " + 0.044715 * " + z +
             " * " + z + " * " + z + ")))";
    case 3: return z + " * sigmoid(" + z + ")";
    case 4: return "tanh(" + z + ")";
    case 5: return "min(max(" + z + ", -2), 2)";
    default: return z + " * 0.5";
  }
}

GeneratedSpec gemm(Rng& rng, const GeneratorOptions& options) {
  Builder b(rng, options);
  const bool batched = rng.chance(0.25);
  if (batched) b.let("E", b.random_extent(1, 3));
  const int64_t M = b.let("M", b.random_extent());
  b.let("N", b.random_extent());
  b.let("K", b.random_extent());
  const std::string dt = b.dtype();
  const std::string bp = batched ? "E, " : "", ip = batched ? "e, " : "";
  const bool transposed = rng.chance(0.4);
  const int kind = static_cast<int>(rng.range(0, 3));
  if (kind == 3) {
    // Gated MLP: X [M, K] → G, U [M, N] → Y [M, F].
    b.let("F", b.random_extent());
    b.input("X", {bp + "M, K"}, dt);
    b.input("Wg", {bp + "K, N"}, dt);
    b.input("Wu", {bp + "K, N"}, dt);
    b.input("Wd", {bp + "N, F"}, dt);
    b.contraction_of_inputs();
    b.line("G[" + ip + "m, n] = sum(k) X[" + ip + "m, k] * Wg[" + ip + "k, n]");
    b.line("U[" + ip + "m, n] = sum(k) X[" + ip + "m, k] * Wu[" + ip + "k, n]");
    b.line("output Y[" + ip + "m, f]" + b.output_dtype() + " = sum(n) " +
           activation(rng, "G[" + ip + "m, n]") + " * U[" + ip + "m, n] * Wd[" + ip + "n, f]");
    return {"gemm", b.text("gemm")};
  }
  b.input("A", {bp + "M, K"}, dt);
  b.input("Bm", {transposed ? bp + "N, K" : bp + "K, N"}, rng.chance(0.2) ? b.dtype() : dt);
  const std::string bm = transposed ? "Bm[" + ip + "n, k]" : "Bm[" + ip + "k, n]";
  std::string a = "A[" + ip + "m, k]";
  if (rng.chance(0.15)) {
    // A triangular operand: the k <= m part of A (masks inside the contraction).
    a = "select(k <= m, " + a + ", 0)";
    (void)M;
  }
  const std::string dot = "sum(k) " + a + " * " + bm;
  b.contraction_of_inputs();
  const std::string od = b.output_dtype();
  const std::string lhs = "[" + ip + "m, n]";
  if (kind == 0) {
    b.line("output C" + lhs + od + " = " + dot);
  } else if (kind == 1) {
    std::string z = "Z" + lhs;
    b.line("Z" + lhs + " = " + dot);
    if (rng.chance(0.6)) {
      b.input("Bias", {"N"}, rng.chance(0.5) ? dt : "f32");
      z = "(" + z + " + Bias[n])";
    }
    b.line("output C" + lhs + od + " = " + activation(rng, z));
  } else {
    // A GEMM chain: (A @ B) @ C2 with an activation in between.
    b.let("P", b.random_extent());
    b.input("C2", {bp + "N, P"}, dt);
    b.line("Z" + lhs + " = " + dot);
    b.line("output Y[" + ip + "m, p]" + od + " = sum(n) " + activation(rng, "Z" + lhs) + " * C2[" +
           ip + "n, p] * 0.25");
  }
  return {"gemm", b.text("gemm")};
}

GeneratedSpec norm(Rng& rng, const GeneratorOptions& options) {
  Builder b(rng, options);
  b.let("T", b.random_extent());
  b.let("H", b.random_extent());
  const std::string dt = b.dtype();
  b.input("X", {"T", "H"}, dt);
  b.input("Wn", {"H"}, dt);
  const bool layer = rng.chance(0.5);
  const bool gemm_after = rng.chance(0.5);
  std::string normed;  // the normalized row element [t, h]
  if (layer) {
    b.input("Bt", {"H"}, dt);
    b.line("Mu[t] = (sum(h) X[t, h]) / H");
    b.line("Var[t] = (sum(h) (X[t, h] - Mu[t]) * (X[t, h] - Mu[t])) / H");
    normed = "(X[t, h] - Mu[t]) * rsqrt(Var[t] + 0.00001) * Wn[h] + Bt[h]";
  } else if (rng.chance(0.5)) {
    b.line("Rs[t] = rsqrt((sum(h) X[t, h] * X[t, h]) / H + 0.00001)");
    normed = "X[t, h] * Rs[t] * Wn[h]";
  } else {
    normed = "X[t, h] * rsqrt((sum(h2) X[t, h2] * X[t, h2]) / H + 0.00001) * Wn[h]";
  }
  if (!gemm_after) {
    b.line("output Y[t, h]" + b.output_dtype() + " = " + normed);
  } else {
    b.let("N", b.random_extent());
    b.input("Wp", {"H", "N"}, dt);
    b.contraction_of_inputs();
    const bool declared = rng.chance(0.5);
    if (declared) b.narrow_intermediate(dt);
    b.line("Xn[t, h]" + std::string(declared ? " : " + dt : "") + " = " + normed);
    b.line("output Y[t, n]" + b.output_dtype() + " = sum(h) Xn[t, h] * Wp[h, n] * 0.25");
  }
  return {"norm", b.text("norm")};
}

GeneratedSpec nested(Rng& rng, const GeneratorOptions& options) {
  Builder b(rng, options);
  b.let("I", b.random_extent());
  b.let("J", b.random_extent());
  b.let("L", b.random_extent(1, 12));
  const std::string dt = b.dtype();
  b.input("X", {"I", "J"}, dt);
  b.contraction_of_inputs();
  switch (rng.range(0, 4)) {
    case 0:
      b.input("Z", {"I", "L"}, dt);
      b.line("output Y[i]" + b.output_dtype() + " = sum(j) X[i, j] * (max(l) Z[i, l])");
      break;
    case 1:
      b.line("output Y[i, j]" + b.output_dtype() + " = X[i, j] - max(j2) X[i, j2]");
      break;
    case 2:
      b.input("A", {"I", "J", "L"}, dt);
      b.input("W", {"L"}, dt);
      b.line("output Y[i]" + b.output_dtype() + " = " + rng.pick({"max", "min", "sum"}) +
             "(j) tanh(sum(l) A[i, j, l] * W[l])");
      break;
    case 3:
      b.input("W", {"J"}, dt);
      b.line("output Y[i]" + b.output_dtype() +
             " = sum(j) (X[i, j] - (sum(j2) X[i, j2]) / J) * W[j]");
      break;
    default:
      b.line("Mn[i] = min(j) X[i, j]");
      b.line("output Y[i, j]" + b.output_dtype() + " = (X[i, j] - Mn[i]) / (1 + max(j2) X[i, j2] - Mn[i])");
      break;
  }
  return {"nested", b.text("nested")};
}

}  // namespace

const std::vector<std::string>& spec_categories() {
  static const std::vector<std::string> categories = {
      "elementwise", "reduction", "softmax", "attention", "gemm", "norm", "nested"};
  return categories;
}

GeneratedSpec generate_spec(Rng& rng, const std::string& category,
                            const GeneratorOptions& options) {
  std::string which = category;
  if (which.empty()) {
    // Attention and softmax carry most of the masks and fusions: draw them more often.
    static const std::vector<std::string> weighted = {
        "elementwise", "reduction", "reduction", "softmax", "softmax", "attention",
        "attention",   "attention", "gemm",      "gemm",    "norm",    "nested"};
    which = rng.pick(weighted);
  }
  // Tensor-core sizes only where a contraction can reach wgmma: the other shapes keep their
  // small sizes (their interpreters would take minutes at 128 x 136 x 192).
  GeneratorOptions adjusted = options;
  adjusted.tensor_core_sizes =
      options.tensor_core_sizes && (which == "attention" || which == "gemm" || which == "norm");
  if (which == "elementwise") return elementwise(rng, adjusted);
  if (which == "reduction") return reduction(rng, adjusted);
  if (which == "softmax") return softmax(rng, adjusted);
  if (which == "attention") return attention(rng, adjusted);
  if (which == "gemm") return gemm(rng, adjusted);
  if (which == "norm") return norm(rng, adjusted);
  return nested(rng, adjusted);
}

}  // namespace nautilus::difftest

#include "einsumdb/executor/expression.hpp"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdlib>

#include "einsumdb/canon/parse.hpp"
#include "einsumdb/core/error.hpp"
#include "einsumdb/executor/tensor.hpp"  // is_complex_v

namespace einsumdb {

// Recursive descent over the grammar in expression.hpp, emitting postfix code.
class ExpressionParser {
 public:
  explicit ExpressionParser(std::string_view text) : s_(text) {}

  Expression run() {
    out_.text_ = std::string(s_);
    sum();
    skip();
    if (pos_ != s_.size()) fail("unexpected '" + std::string(1, s_[pos_]) + "'");
    if (out_.array_.empty()) fail("the expression reads no array");
    int depth = 0;
    for (const auto& in : out_.program_) {
      depth += in.op == Expression::Op::x || in.op == Expression::Op::constant ? 1
               : binary(in.op)                                                 ? -1
                                                                               : 0;
      out_.depth_ = std::max(out_.depth_, depth);
    }
    return std::move(out_);
  }

 private:
  using Op = Expression::Op;
  static bool binary(Op op) {
    return op == Op::add || op == Op::sub || op == Op::mul || op == Op::div || op == Op::pow;
  }
  [[noreturn]] void fail(const std::string& what) const {
    throw SpecError("expression '" + std::string(s_) + "' at position " + std::to_string(pos_) +
                    ": " + what);
  }
  void skip() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  bool eat(char c) {
    skip();
    if (pos_ < s_.size() && s_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  void emit(Op op, double v = 0) { out_.program_.push_back({op, v}); }

  void sum() {
    product();
    for (;;) {
      if (eat('+')) {
        product();
        emit(Op::add);
      } else if (eat('-')) {
        product();
        emit(Op::sub);
      } else {
        return;
      }
    }
  }
  void product() {
    unary();
    for (;;) {
      if (eat('*')) {
        unary();
        emit(Op::mul);
      } else if (eat('/')) {
        unary();
        emit(Op::div);
      } else {
        return;
      }
    }
  }
  void unary() {
    if (eat('-')) {
      unary();
      emit(Op::neg);
      return;
    }
    if (eat('+')) return unary();
    power();
  }
  void power() {
    primary();
    if (eat('^')) {
      unary();  // right-associative, binds tighter than unary minus on its left
      emit(Op::pow);
    }
  }
  void primary() {
    if (++depth_ > 64) fail("nested too deeply");
    skip();
    if (pos_ >= s_.size()) fail("expected a number, a name or '('");
    const char c = s_[pos_];
    if (c == '(') {
      ++pos_;
      sum();
      if (!eat(')')) fail("expected ')'");
    } else if (std::isdigit(static_cast<unsigned char>(c)) || c == '.') {
      const std::string rest(s_.substr(pos_));
      char* end = nullptr;
      const double v = std::strtod(rest.c_str(), &end);
      if (end == rest.c_str() || !std::isfinite(v)) fail("bad number");
      pos_ += static_cast<std::size_t>(end - rest.c_str());
      emit(Op::constant, v);
    } else if (std::isalpha(static_cast<unsigned char>(c)) || c == '_') {
      const std::size_t start = pos_;
      while (pos_ < s_.size() &&
             (std::isalnum(static_cast<unsigned char>(s_[pos_])) || s_[pos_] == '_'))
        ++pos_;
      const std::string name(s_.substr(start, pos_ - start));
      static const std::pair<const char*, Op> kFunctions[] = {
          {"sin", Op::sin}, {"cos", Op::cos},   {"tan", Op::tan}, {"exp", Op::exp},
          {"log", Op::log}, {"sqrt", Op::sqrt}, {"abs", Op::abs}, {"tanh", Op::tanh}};
      if (eat('(')) {
        const auto* f = std::find_if(std::begin(kFunctions), std::end(kFunctions),
                                     [&](const auto& p) { return name == p.first; });
        if (f == std::end(kFunctions))
          fail("unknown function '" + name + "'; known: sin cos tan exp log sqrt abs tanh");
        sum();
        if (!eat(')')) fail("expected ')'");
        emit(f->second);
      } else {
        if (!out_.array_.empty() && out_.array_ != name)
          fail("reads array '" + name + "' as well as '" + out_.array_ +
               "'; a functional operand is an expression of one array");
        out_.array_ = name;
        emit(Op::x);
      }
    } else {
      fail("unexpected '" + std::string(1, c) + "'");
    }
    --depth_;
  }

  std::string_view s_;
  std::size_t pos_ = 0;
  int depth_ = 0;
  Expression out_;
};

Expression Expression::parse(std::string_view text) {
  return ExpressionParser(text).run();
}

namespace {

// a^b; a complex number to a whole power of at most 64 by repeated squaring (std::pow's
// exp(b·log a) is off in the last bits there, and not exactly 0 at 0).
template <typename T>
T power(T a, T b) {
  if constexpr (is_complex_v<T>) {
    const auto n = b.real();
    if (b.imag() == 0 && n == std::floor(n) && std::abs(n) <= 64) {
      T result(1), base = a;
      for (auto k = static_cast<long>(std::abs(n)); k > 0; k >>= 1, base *= base)
        if (k & 1) result *= base;
      return n < 0 ? T(1) / result : result;
    }
  }
  return std::pow(a, b);
}

}  // namespace

template <typename T, typename K>
bool Expression::with_binary(Op op, K&& k) {
  switch (op) {
    case Op::add:
      k([](T a, T b) { return a + b; });
      return true;
    case Op::sub:
      k([](T a, T b) { return a - b; });
      return true;
    case Op::mul:
      k([](T a, T b) { return a * b; });
      return true;
    case Op::div:
      k([](T a, T b) { return a / b; });
      return true;
    case Op::pow:
      k([](T a, T b) { return power(a, b); });
      return true;
    default:
      return false;
  }
}

template <typename T, typename K>
void Expression::with_unary(Op op, K&& k) {
  switch (op) {
    case Op::neg:
      return k([](T b) { return -b; });
    case Op::sin:
      return k([](T b) { return std::sin(b); });
    case Op::cos:
      return k([](T b) { return std::cos(b); });
    case Op::tan:
      return k([](T b) { return std::tan(b); });
    case Op::exp:
      return k([](T b) { return std::exp(b); });
    case Op::log:
      return k([](T b) { return std::log(b); });
    case Op::sqrt:
      return k([](T b) { return std::sqrt(b); });
    case Op::abs:
      return k([](T b) { return T(std::abs(b)); });
    case Op::tanh:
      return k([](T b) { return std::tanh(b); });
    default:
      EINSUMDB_ASSERT(false, "not a unary operation");
  }
}

double Expression::operator()(double x) const {
  return evaluate(x);
}

std::complex<double> Expression::operator()(std::complex<double> x) const {
  return evaluate(x);
}

template <typename T>
T Expression::evaluate(T x) const {
  std::vector<T> stack(static_cast<std::size_t>(std::max(depth_, 1)));
  int top = 0;
  for (const auto& in : program_) {
    if (in.op == Op::x) {
      stack[top++] = x;
    } else if (in.op == Op::constant) {
      stack[top++] = T(in.value);
    } else if (!with_binary<T>(in.op, [&](auto f) {
                 --top;
                 stack[top - 1] = f(stack[top - 1], stack[top]);
               })) {
      with_unary<T>(in.op, [&](auto f) { stack[top - 1] = f(stack[top - 1]); });
    }
  }
  return stack[0];
}

template <typename T>
void Expression::apply(const T* in, std::int64_t stride, T* out, std::int64_t n) const {
  // The program runs over chunks: each instruction is one simple loop the compiler vectorizes.
  // A stack entry is a run of values (its own chunk of buffer, or the input itself when it is
  // contiguous: no copy) or a constant (no fill: the operation takes it as a scalar). A binary
  // operation followed by one with a constant (2*A+1, U*U-1) is one loop, and the last loop
  // writes into `out`.
  constexpr std::int64_t kChunk = 256;
  struct Entry {
    const T* p;  // null: the constant c
    T c;
  };
  // Per-thread scratch, grown and kept: packing calls this once per run of an operand's last
  // axis, which may be a few elements long.
  thread_local std::vector<T> buffer;
  thread_local std::vector<Entry> stack;
  const auto depth = static_cast<std::size_t>(std::max(depth_, 1));
  if (buffer.size() < kChunk * depth) buffer.resize(kChunk * depth);
  if (stack.size() < depth) stack.resize(depth);
  const std::size_t size = program_.size();
  for (std::int64_t lo = 0; lo < n; lo += kChunk) {
    const std::int64_t m = std::min(kChunk, n - lo);
    int top = 0;
    std::size_t pc = 0;
    auto slot = [&](int k, std::size_t end) {  // where an instruction ending at `end` writes
      return end + 1 == size ? out + lo : buffer.data() + k * kChunk;
    };
    for (; pc < size; ++pc) {
      const Instr& instr = program_[pc];
      if (instr.op == Op::x) {
        const T* src = in + lo * stride;
        if (stride == 1) {
          stack[top++] = {src, T(0)};
        } else {
          T* d = slot(top, pc);
          for (std::int64_t i = 0; i < m; ++i) d[i] = src[i * stride];
          stack[top++] = {d, T(0)};
        }
        continue;
      }
      if (instr.op == Op::constant) {
        stack[top++] = {nullptr, static_cast<T>(instr.value)};
        continue;
      }
      const bool chain = pc + 2 < size && program_[pc + 1].op == Op::constant &&
                         with_binary<T>(program_[pc + 2].op, [](auto) {});
      const bool binary = with_binary<T>(instr.op, [&](auto f) {
        const Entry x = stack[top - 2], y = stack[top - 1];
        --top;
        if (!x.p && !y.p) {  // constants fold
          stack[top - 1] = {nullptr, f(x.c, y.c)};
          return;
        }
        T* d = slot(top - 1, chain ? pc + 2 : pc);
        auto loop = [&](auto h) {
          if (x.p && y.p)
            for (std::int64_t i = 0; i < m; ++i) d[i] = h(x.p[i], y.p[i]);
          else if (x.p)
            for (std::int64_t i = 0; i < m; ++i) d[i] = h(x.p[i], y.c);
          else
            for (std::int64_t i = 0; i < m; ++i) d[i] = h(x.c, y.p[i]);
        };
        if (!chain) {
          loop(f);
        } else {
          const T c = static_cast<T>(program_[pc + 1].value);
          with_binary<T>(program_[pc + 2].op,
                         [&](auto g) { loop([f, g, c](T a, T b) { return g(f(a, b), c); }); });
          pc += 2;
        }
        stack[top - 1] = {d, T(0)};
      });
      if (binary) continue;
      // A unary operation.
      const Entry y = stack[top - 1];
      T* d = y.p ? slot(top - 1, pc) : nullptr;
      auto unary = [&](auto f) {
        if (!y.p) {
          stack[top - 1].c = f(y.c);
          return;
        }
        for (std::int64_t i = 0; i < m; ++i) d[i] = f(y.p[i]);
        stack[top - 1] = {d, T(0)};
      };
      with_unary<T>(instr.op, unary);
    }
    if (!stack[0].p)
      std::fill(out + lo, out + lo + m, stack[0].c);
    else if (stack[0].p != out + lo)
      std::copy(stack[0].p, stack[0].p + m, out + lo);
  }
}

template void Expression::apply<float>(const float*, std::int64_t, float*, std::int64_t) const;
template void Expression::apply<double>(const double*, std::int64_t, double*, std::int64_t) const;
template void Expression::apply<std::complex<float>>(const std::complex<float>*, std::int64_t,
                                                     std::complex<float>*, std::int64_t) const;
template void Expression::apply<std::complex<double>>(const std::complex<double>*, std::int64_t,
                                                      std::complex<double>*, std::int64_t) const;

Functions take_functions(nlohmann::json& j) {
  Functions functions;
  if (!j.is_object()) return functions;
  const auto it = j.find("functions");
  if (it == j.end()) return functions;
  if (!it->is_object())
    throw SpecError(
        "spec JSON: 'functions' must map operand names to expressions such as "
        "\"2*A+1\"");
  auto* shapes = j.contains("shapes") && j["shapes"].is_object() ? &j["shapes"] : nullptr;
  auto* dtypes = j.contains("dtypes") && j["dtypes"].is_object() ? &j["dtypes"] : nullptr;
  std::vector<std::string> sources;
  for (const auto& [name, value] : it->items()) {
    const std::string where = "spec JSON: functions." + name;
    if (!value.is_string()) throw SpecError(where + ": expected an expression string");
    Expression f;
    try {
      f = Expression::parse(value.get<std::string>());
    } catch (const SpecError& err) {
      throw SpecError(where + ": " + err.what());
    }
    if (!shapes || !shapes->contains(f.array()))
      throw SpecError(where + ": array '" + f.array() + "' has no shape in 'shapes'");
    if (shapes->contains(name) || functions.count(name))
      throw SpecError(where + ": '" + name + "' is also an array; give the function its own name");
    sources.push_back(f.array());
    functions.emplace(name, std::move(f));
  }
  for (const auto& [name, f] : functions) {
    (*shapes)[name] = (*shapes)[f.array()];
    if (dtypes && dtypes->contains(f.array())) (*dtypes)[name] = (*dtypes)[f.array()];
  }
  // An array read only through functions is not an operand of the idealized einsum.
  std::vector<std::string> used;
  if (j.contains("batch") && j["batch"].is_array())
    for (const auto& row : j["batch"])
      if (row.is_array())
        for (const auto& name : row)
          if (name.is_string()) used.push_back(name.get<std::string>());
  for (const auto& source : sources)
    if (std::find(used.begin(), used.end(), source) == used.end()) {
      shapes->erase(source);
      if (dtypes) dtypes->erase(source);
    }
  j.erase("functions");
  return functions;
}

}  // namespace einsumdb

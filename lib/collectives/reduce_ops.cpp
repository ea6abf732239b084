// Element-wise combining kernels. Loads and stores go through memcpy (received packets give no
// alignment); GCC turns these loops into vector code at -O3 all the same.
#include "collectives/reduce_ops.hpp"
#include "support/enum_names.hpp"

#include <array>
#include <cmath>
#include <cstring>
#include <limits>
#include <memory>
#include <stdexcept>
#include <type_traits>

namespace netsparse::collectives {

std::optional<DataType> data_type_from_int(int v) noexcept {
  if (v < 0 || v >= kDataTypeCount) return std::nullopt;
  return static_cast<DataType>(v);
}
std::optional<ReduceOp> reduce_op_from_int(int v) noexcept {
  if (v < 0 || v >= kReduceOpCount) return std::nullopt;
  return static_cast<ReduceOp>(v);
}

std::size_t element_size(DataType t) noexcept {
  switch (t) {
    case DataType::kInt8:
      return 1;
    case DataType::kInt16:
      return 2;
    case DataType::kInt32:
      return 4;
    case DataType::kFp16:
      return 2;
    case DataType::kFp32:
      return 4;
    case DataType::kFp64:
      return 8;
  }
  return 0;
}

constexpr auto kDataTypeNames = std::to_array<support::EnumName<DataType>>({
    {DataType::kInt8, "int8"},
    {DataType::kInt16, "int16"},
    {DataType::kInt32, "int32"},
    {DataType::kFp16, "fp16"},
    {DataType::kFp32, "fp32"},
    {DataType::kFp64, "fp64"},
});

const char* to_string(DataType t) noexcept {
  return support::name_of<kDataTypeNames>(t, "unknown datatype");
}

constexpr auto kReduceOpNames = std::to_array<support::EnumName<ReduceOp>>({
    {ReduceOp::kSum, "sum"},
    {ReduceOp::kProd, "prod"},
    {ReduceOp::kMin, "min"},
    {ReduceOp::kMax, "max"},
    {ReduceOp::kUser, "user"},
});

const char* to_string(ReduceOp op) noexcept {
  return support::name_of<kReduceOpNames>(op, "unknown op");
}

double half_to_double(std::uint16_t h) noexcept {
  const int sign = h >> 15;
  const int exp = (h >> 10) & 0x1f;
  const int mant = h & 0x3ff;
  double v;
  if (exp == 0) {
    v = std::ldexp(static_cast<double>(mant), -24);
  } else if (exp == 31) {
    v = mant == 0 ? std::numeric_limits<double>::infinity()
                  : std::numeric_limits<double>::quiet_NaN();
  } else {
    v = std::ldexp(static_cast<double>(mant | 0x400), exp - 25);
  }
  return sign ? -v : v;
}

std::uint16_t double_to_half(double d) noexcept {
  const std::uint16_t sign = std::signbit(d) ? 0x8000 : 0;
  if (std::isnan(d)) return 0x7e00;  // one canonical quiet NaN
  const double a = std::fabs(d);
  // 65520 lies halfway between the largest half (65504) and 2^16: ties to even go up, to inf.
  if (a >= 65520.0) return sign | 0x7c00;
  if (a < 0x1p-14) {  // subnormal (or zero): units of 2^-24, exact scaling, one rounding
    const double q = std::nearbyint(a * 0x1p24);
    return sign | static_cast<std::uint16_t>(q);  // q == 1024 is the smallest normal, encoded so
  }
  int e2 = 0;
  std::frexp(a, &e2);                                // a = m * 2^e2, m in [0.5, 1)
  int e = e2 - 1;                                    // a in [2^e, 2^(e+1))
  double q = std::nearbyint(std::ldexp(a, 10 - e));  // in [1024, 2048]
  if (q == 2048.0) {
    q = 1024.0;
    ++e;
  }
  if (e > 15) return sign | 0x7c00;
  return sign | static_cast<std::uint16_t>(((e + 15) << 10) | (static_cast<int>(q) - 1024));
}

namespace {

// Integer arithmetic wraps (two's complement), done in the unsigned type: no signed overflow.
// Types narrower than unsigned int are widened to it first: they would otherwise be promoted to
// (signed) int, where 65535 * 65535 overflows (UBSan caught it on uint16).
template <class T>
struct IntOps {
  using U = std::conditional_t<(sizeof(T) < sizeof(unsigned)), unsigned, std::make_unsigned_t<T>>;
  static T sum(T a, T b) { return static_cast<T>(static_cast<U>(a) + static_cast<U>(b)); }
  static T prod(T a, T b) { return static_cast<T>(static_cast<U>(a) * static_cast<U>(b)); }
  static T min(T a, T b) { return a < b ? a : b; }
  static T max(T a, T b) { return a < b ? b : a; }
};

// min / max symmetric bit for bit: any NaN gives the canonical NaN, -0 orders before +0.
template <class T>
struct FloatOps {
  static T sum(T a, T b) { return a + b; }
  static T prod(T a, T b) { return a * b; }
  static T min(T a, T b) {
    if (a != a || b != b) return std::numeric_limits<T>::quiet_NaN();
    if (a < b) return a;
    if (b < a) return b;
    return std::signbit(a) ? a : b;
  }
  static T max(T a, T b) {
    if (a != a || b != b) return std::numeric_limits<T>::quiet_NaN();
    if (a < b) return b;
    if (b < a) return a;
    return std::signbit(a) ? b : a;
  }
};

template <class T, class F>
void apply(void* dst, const void* a, const void* b, std::size_t count, F f) {
  auto* d = static_cast<unsigned char*>(dst);
  const auto* x = static_cast<const unsigned char*>(a);
  const auto* y = static_cast<const unsigned char*>(b);
  for (std::size_t i = 0; i < count; ++i) {
    T u, v;
    std::memcpy(&u, x + i * sizeof(T), sizeof(T));
    std::memcpy(&v, y + i * sizeof(T), sizeof(T));
    const T r = f(u, v);
    std::memcpy(d + i * sizeof(T), &r, sizeof(T));
  }
}

template <class T, class Ops>
void apply_op(ReduceOp op, void* dst, const void* a, const void* b, std::size_t n) {
  switch (op) {
    case ReduceOp::kSum:
      apply<T>(dst, a, b, n, [](T u, T v) { return Ops::sum(u, v); });
      return;
    case ReduceOp::kProd:
      apply<T>(dst, a, b, n, [](T u, T v) { return Ops::prod(u, v); });
      return;
    case ReduceOp::kMin:
      apply<T>(dst, a, b, n, [](T u, T v) { return Ops::min(u, v); });
      return;
    case ReduceOp::kMax:
      apply<T>(dst, a, b, n, [](T u, T v) { return Ops::max(u, v); });
      return;
    case ReduceOp::kUser:
      break;
  }
  throw std::logic_error("apply_op: user operators are applied through their callback");
}

// fp16 (bit patterns): computed in double (exact for sums and products of two halves) and
// rounded once.
struct HalfOps {
  using H = std::uint16_t;
  static double d(H h) { return half_to_double(h); }
  static H sum(H a, H b) { return double_to_half(d(a) + d(b)); }
  static H prod(H a, H b) { return double_to_half(d(a) * d(b)); }
  static H min(H a, H b) { return double_to_half(FloatOps<double>::min(d(a), d(b))); }
  static H max(H a, H b) { return double_to_half(FloatOps<double>::max(d(a), d(b))); }
};

}  // namespace

Reducer::Reducer(DataType type, ReduceOp op, const UserOp* user) noexcept
    : type_(type), op_(op), esize_(element_size(type)) {
  if (user != nullptr) user_ = *user;
}

bool Reducer::commutative() const noexcept {
  return op_ != ReduceOp::kUser || user_.commutative;
}

void Reducer::combine(void* dst, const void* a, const void* b, std::size_t count) const {
  if (count == 0) return;
  if (op_ == ReduceOp::kUser) {
    if (user_.fn == nullptr) throw std::invalid_argument("user operator without a function");
    const int dtype = static_cast<int>(type_);
    const std::size_t bytes = count * esize_;
    if (dst == a) {
      user_.fn(dst, b, count, dtype, user_.user_data);
    } else if (dst == b) {
      if (user_.commutative) {
        user_.fn(dst, a, count, dtype, user_.user_data);
      } else {  // keep the left operand on the left: work on a copy of it
        std::unique_ptr<unsigned char[]> left(new unsigned char[bytes]);
        std::memcpy(left.get(), a, bytes);
        user_.fn(left.get(), b, count, dtype, user_.user_data);
        std::memcpy(dst, left.get(), bytes);
      }
    } else {
      std::memcpy(dst, a, bytes);
      user_.fn(dst, b, count, dtype, user_.user_data);
    }
    return;
  }
  switch (type_) {
    case DataType::kInt8:
      return apply_op<std::int8_t, IntOps<std::int8_t>>(op_, dst, a, b, count);
    case DataType::kInt16:
      return apply_op<std::int16_t, IntOps<std::int16_t>>(op_, dst, a, b, count);
    case DataType::kInt32:
      return apply_op<std::int32_t, IntOps<std::int32_t>>(op_, dst, a, b, count);
    case DataType::kFp16:
      return apply_op<std::uint16_t, HalfOps>(op_, dst, a, b, count);
    case DataType::kFp32:
      return apply_op<float, FloatOps<float>>(op_, dst, a, b, count);
    case DataType::kFp64:
      return apply_op<double, FloatOps<double>>(op_, dst, a, b, count);
  }
}

}  // namespace netsparse::collectives

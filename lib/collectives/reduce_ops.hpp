// Datatypes and reduction operators of the collectives, bound together as a Reducer that
// combines two element arrays into a third. The one place that knows element layouts: the
// allreduce algorithms move and combine bytes through it.
//
// Bitwise reproducibility rests on two properties kept here: every built-in operator is
// commutative bit for bit (IEEE addition and multiplication are; min and max are made so by
// ordering -0 before +0 and returning one canonical NaN), so a combining step does not depend on
// which operand arrived first; and fp16 is computed in double and rounded once, so a step's
// result does not depend on the host's float environment beyond round-to-nearest.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <string>

namespace netsparse::collectives {

// Values are the C API's NS_DTYPE_* (include/netsparse/collectives.h).
enum class DataType : std::uint8_t { kInt8 = 0, kInt16, kInt32, kFp16, kFp32, kFp64 };
inline constexpr int kDataTypeCount = 6;
// Values are the C API's NS_OP_*.
enum class ReduceOp : std::uint8_t { kSum = 0, kProd, kMin, kMax, kUser };
inline constexpr int kReduceOpCount = 5;

std::optional<DataType> data_type_from_int(int v) noexcept;
std::optional<ReduceOp> reduce_op_from_int(int v) noexcept;
std::size_t element_size(DataType t) noexcept;
const char* to_string(DataType t) noexcept;
const char* to_string(ReduceOp op) noexcept;

// A user operator: inout[i] = inout[i] op in[i] for i < count, where inout holds the left
// operand (the lower ranks' side of the combining tree). `commutative` allows the single- and
// multi-buffer designs (which combine in arrival order); without it the tree is always used.
// `id` names the operator across ranks (function addresses differ between processes), so that
// ranks can check they reduce with the same one.
struct UserOp {
  void (*fn)(void* inout, const void* in, std::size_t count, int dtype, void* user_data) = nullptr;
  void* user_data = nullptr;
  bool commutative = false;
  std::uint32_t id = 0;
};

// IEEE binary16 <-> double, round to nearest even, subnormals, infinities and NaN kept.
double half_to_double(std::uint16_t h) noexcept;
std::uint16_t double_to_half(double d) noexcept;

class Reducer {
 public:
  // user is required for kUser (and ignored otherwise).
  Reducer(DataType type, ReduceOp op, const UserOp* user = nullptr) noexcept;
  DataType type() const noexcept { return type_; }
  ReduceOp op() const noexcept { return op_; }
  std::size_t element_bytes() const noexcept { return esize_; }
  // Whether combine(a, b) == combine(b, a) bit for bit (built-ins always; user ops if declared).
  bool commutative() const noexcept;
  // dst[i] = a[i] op b[i] for i < count; a is the left operand. dst may be a or b; otherwise the
  // three must not overlap. Pointers need no alignment (the wire gives none).
  void combine(void* dst, const void* a, const void* b, std::size_t count) const;

 private:
  DataType type_;
  ReduceOp op_;
  std::size_t esize_;
  UserOp user_{};
};

}  // namespace netsparse::collectives

// numpy operands handed to the kernels without a copy: checked (type, dtype, shape, row-major
// contiguity, alignment, writability) and viewed as spans. A check returns what is wrong as
// text instead of raising, so a collective call can first agree on it across the ranks
// (collective.hpp) and no rank is left waiting for one that refused its input.
#pragma once

#include <pybind11/numpy.h>
#include <pybind11/pybind11.h>

#include <cstdint>
#include <initializer_list>
#include <span>
#include <string>

namespace netsparse::python {

namespace py = pybind11;

template <class T>
[[nodiscard]] inline const char* dtype_name() {
  if constexpr (std::is_same_v<T, float>) return "float32";
  if constexpr (std::is_same_v<T, double>) return "float64";
  if constexpr (std::is_same_v<T, std::int64_t>) return "int64";
  if constexpr (std::is_same_v<T, std::uint64_t>) return "uint64";
  return "?";
}

// Equivalent dtypes (the same type and byte order; not necessarily the same dtype object: an
// array that travelled through pickle has its own).
[[nodiscard]] inline bool same_dtype(const py::dtype& a, const py::dtype& b) {
  return py::detail::npy_api::get().PyArray_EquivTypes_(a.ptr(), b.ptr());
}
template <class T>
[[nodiscard]] inline bool has_dtype(const py::array& a) {
  return same_dtype(a.dtype(), py::dtype::of<T>());
}

// "float32", "int64", ...
[[nodiscard]] inline std::string dtype_text(const py::dtype& d) {
  return d.attr("name").cast<std::string>();
}

[[nodiscard]] inline std::string shape_text(const py::array& a) {
  std::string s = "(";
  for (py::ssize_t d = 0; d < a.ndim(); ++d) {
    s += (d ? ", " : "") + std::to_string(a.shape(d));
  }
  return s + (a.ndim() == 1 ? ",)" : ")");
}

[[nodiscard]] inline std::string strides_text(const py::array& a) {
  std::string s = "(";
  for (py::ssize_t d = 0; d < a.ndim(); ++d) {
    s += (d ? ", " : "") + std::to_string(a.strides(d));
  }
  return s + (a.ndim() == 1 ? ",)" : ")");
}

// Checks `obj` as a numpy array of T with exactly `shape` (-1: any extent), C-contiguous,
// aligned, writable when `writable`. On success `out` views its elements and "" is returned;
// otherwise the reason, naming the operand.
template <class T>
[[nodiscard]] std::string check_array(py::handle obj, const std::string& name,
                                      std::initializer_list<py::ssize_t> shape, bool writable,
                                      std::span<T>& out) {
  if (!py::isinstance<py::array>(obj)) {
    return name + " must be a numpy.ndarray, got " +
           std::string(py::str(py::type::of(obj).attr("__name__")));
  }
  const auto a = py::reinterpret_borrow<py::array>(obj);
  if (!has_dtype<std::remove_const_t<T>>(a)) {
    return name + " must have dtype " + dtype_name<std::remove_const_t<T>>() + ", got " +
           dtype_text(a.dtype()) + " (no implicit conversion: convert with .astype)";
  }
  bool shape_ok = a.ndim() == static_cast<py::ssize_t>(shape.size());
  std::string want = "(";
  py::ssize_t d = 0;
  for (py::ssize_t extent : shape) {
    want += (d ? ", " : "") + (extent < 0 ? std::string("any") : std::to_string(extent));
    if (shape_ok && extent >= 0 && a.shape(d) != extent) shape_ok = false;
    ++d;
  }
  want += shape.size() == 1 ? ",)" : ")";
  if (!shape_ok) {
    return name + " has shape " + shape_text(a) + ", this rank's block needs " + want;
  }
  if ((a.flags() & py::array::c_style) == 0) {
    return name + " must be C-contiguous (row-major, no gaps); its strides are " + strides_text(a) +
           " (numpy.ascontiguousarray makes a contiguous copy)";
  }
  if (reinterpret_cast<std::uintptr_t>(a.data()) % alignof(T) != 0) {
    return name + " is not aligned to its element size";
  }
  if (writable && !a.writeable()) return name + " is read-only";
  auto* data = static_cast<T*>(const_cast<void*>(a.data()));
  out = std::span<T>(data, static_cast<std::size_t>(a.size()));
  return {};
}

// The first non-empty reason.
[[nodiscard]] inline std::string first_problem(std::initializer_list<std::string> problems) {
  for (const std::string& p : problems) {
    if (!p.empty()) return p;
  }
  return {};
}

}  // namespace netsparse::python

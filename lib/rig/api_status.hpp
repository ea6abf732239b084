// The RIG API's exception map: an EngineError keeps its status, every other exception is mapped
// by the C API's one map (support/api_error.hpp). Used by api.cpp and api_mpi.cpp.
#pragma once

#include <string>
#include <utility>

#include "rig/engine.hpp"
#include "support/api_error.hpp"

namespace netsparse::rig {

using support::fail;
using support::set_last_error;

// The status and message of the exception being handled (call inside a catch block):
// EngineError -> its status, otherwise support::status_of_current_exception.
[[nodiscard]] inline std::pair<ns_status_t, std::string> status_of_current_exception() noexcept {
  try {
    throw;
  } catch (const EngineError& e) {
    return {e.status(), e.what()};
  } catch (...) {
    return support::status_of_current_exception();
  }
}

// Runs f (which returns a status); an exception becomes its status and ns_last_error.
template <class F>
ns_status_t guarded(const char* call, F&& f) noexcept {
  return support::guarded(call, std::forward<F>(f), &status_of_current_exception);
}

}  // namespace netsparse::rig

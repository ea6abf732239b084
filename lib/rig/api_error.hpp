// The C API's error reporting, shared by every C entry point (api.cpp, api_mpi.cpp, the
// collectives' api.cpp): the per-thread "last error" (ns_last_error), written only by the API
// layer, never by the engine (which reports failures by status, reason code or exception), and
// the one map from an exception to a status.
#pragma once

#include <string>
#include <utility>

#include "netsparse/netsparse.h"

namespace netsparse::rig {

void set_last_error(const std::string& what);

// The status and message of the exception being handled (call inside a catch block):
// EngineError -> its status, std::bad_alloc -> NS_ERR_NO_MEMORY, std::invalid_argument ->
// NS_ERR_INVALID, std::length_error (a size this build or machine cannot hold, e.g. an Idx
// Filter over more rows than memory allows) -> NS_ERR_UNSUPPORTED, other std::logic_error ->
// NS_ERR_STATE, anything else -> NS_ERR_TRANSPORT.
[[nodiscard]] std::pair<ns_status_t, std::string> status_of_current_exception() noexcept;

// Records "call: why" for ns_last_error and returns s.
inline ns_status_t fail(const char* call, ns_status_t s, const std::string& why) {
  set_last_error(std::string(call) + ": " + why);
  return s;
}

// Runs f (which returns a status); an exception becomes its status and ns_last_error.
template <class F>
ns_status_t guarded(const char* call, F&& f) noexcept {
  try {
    return f();
  } catch (...) {
    auto [status, what] = status_of_current_exception();
    return fail(call, status, what);
  }
}

}  // namespace netsparse::rig

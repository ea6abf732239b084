// The C API's error reporting, shared by every C entry point (the RIG API's api.cpp and
// api_mpi.cpp, the collectives' api.cpp): the per-thread "last error" (ns_last_error), written
// only by the API layer, never by an engine (which reports failures by status, reason code or
// exception), the texts of the statuses (ns_status_str, in api_error.cpp), and the one map from
// a standard exception to a status. A layer with an exception
// of its own that carries a status (the engine's EngineError, the collectives' CollectiveError)
// maps it first and hands everything else to this one (rig/api_status.hpp, collectives/api.cpp).
#pragma once

#include <string>
#include <utility>

#include "netsparse/netsparse.h"

namespace netsparse::support {

void set_last_error(const std::string& what);

// The status and message of the exception being handled (call inside a catch block):
// std::bad_alloc -> NS_ERR_NO_MEMORY, std::invalid_argument -> NS_ERR_INVALID,
// std::length_error (a size this build or machine cannot hold, e.g. an Idx Filter over more rows
// than memory allows) -> NS_ERR_UNSUPPORTED, other std::logic_error -> NS_ERR_STATE, anything
// else -> NS_ERR_TRANSPORT.
[[nodiscard]] std::pair<ns_status_t, std::string> status_of_current_exception() noexcept;

// Records "call: why" for ns_last_error and returns s.
inline ns_status_t fail(const char* call, ns_status_t s, const std::string& why) {
  set_last_error(std::string(call) + ": " + why);
  return s;
}

// Runs f (which returns a status); an exception becomes its status (by `status_of`, called
// inside the catch block) and ns_last_error.
template <class F, class StatusOf = decltype(&status_of_current_exception)>
ns_status_t guarded(const char* call, F&& f,
                    StatusOf status_of = &status_of_current_exception) noexcept {
  try {
    return f();
  } catch (...) {
    auto [status, what] = status_of();
    return fail(call, status, what);
  }
}

}  // namespace netsparse::support

// The checks every C entry point of the RIG API starts with (api.cpp, api_stats.cpp): an
// invalid argument, and handles that are not (or no longer) live.
#pragma once

#include <string>

#include "netsparse/netsparse.h"
#include "rig/api_status.hpp"
#include "rig/handles.hpp"

namespace netsparse::rig::api {

inline ns_status_t invalid(const char* call, const char* why) {
  return fail(call, NS_ERR_INVALID, why);
}

inline bool live(const void* h, HandleKind k) noexcept {
  return is_live_handle(h, k);
}
// A handle that is not (or no longer) one of ours: closed, destroyed, or never created.
inline ns_status_t not_live(const char* call, const char* name, HandleKind k) {
  set_last_error(std::string(call) + ": " + name + " is not a live " + handle_kind_name(k) +
                 " (closed, destroyed or never created)");
  return NS_ERR_INVALID;
}

}  // namespace netsparse::rig::api

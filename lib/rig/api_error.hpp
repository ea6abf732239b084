// The C API's per-thread "last error" (ns_last_error): written only by the API layer (api.cpp,
// api_mpi.cpp), never by the engine, which reports failures by status, reason code or exception.
#pragma once

#include <string>

namespace netsparse::rig {
void set_last_error(const std::string& what);
}  // namespace netsparse::rig

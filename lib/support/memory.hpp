// Memory needs checked before they are allocated: what a process can still have (the kernel's
// MemAvailable, capped by the address-space and data rlimits) and the one exception that says
// how much was needed and for what, so a size that cannot fit ends in a clear error, before
// anything is half-built, instead of a bare std::bad_alloc or the OOM killer mid-run.
#pragma once

#include <cstdint>
#include <new>
#include <string>
#include <string_view>

namespace netsparse::support {

// A std::bad_alloc (so the C API maps it to NS_ERR_NO_MEMORY and Python to MemoryError) whose
// what() names the size needed, what it is for and the limit it exceeds.
class OutOfMemory : public std::bad_alloc {
 public:
  explicit OutOfMemory(std::string what) : what_(std::move(what)) {}
  [[nodiscard]] const char* what() const noexcept override { return what_.c_str(); }

 private:
  std::string what_;
};

struct MemoryLimit {
  std::uint64_t bytes = UINT64_MAX;  // UINT64_MAX: nothing known limits it
  std::string source;                // "MemAvailable in /proc/meminfo", "RLIMIT_AS", ...
};

// What this process can still allocate: the smallest of /proc/meminfo's MemAvailable (memory
// the kernel can give without swapping) and the soft RLIMIT_AS and RLIMIT_DATA (whole limits:
// the process's current use is not subtracted, so they are upper bounds). Read at each call.
[[nodiscard]] MemoryLimit available_memory();

// "1.5 GiB" / "512 B": for messages.
[[nodiscard]] std::string human_bytes(std::uint64_t bytes);

// Throws OutOfMemory "<who> needs <need> bytes (<human>) for <what>, more than the <limit> bytes
// (<human>) available (<source>)" when `need` exceeds available_memory().
void require_memory(std::string_view who, std::uint64_t need, std::string_view what);

}  // namespace netsparse::support

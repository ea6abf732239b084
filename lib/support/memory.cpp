// Memory needs checked before they are allocated (memory.hpp).
#include "support/memory.hpp"

#include <sys/resource.h>

#include <cstdio>
#include <fstream>
#include <sstream>

namespace netsparse::support {

MemoryLimit available_memory() {
  MemoryLimit limit;
  std::ifstream meminfo("/proc/meminfo");
  std::string line;
  while (std::getline(meminfo, line)) {
    // "MemAvailable:   24180092 kB"
    if (!line.starts_with("MemAvailable:")) continue;
    std::istringstream fields(line.substr(13));
    std::uint64_t kib = 0;
    if (fields >> kib) limit = {kib * 1024, "MemAvailable in /proc/meminfo"};
    break;
  }
  for (const auto& [resource, name] : {std::pair{RLIMIT_AS, "RLIMIT_AS (ulimit -v)"},
                                       std::pair{RLIMIT_DATA, "RLIMIT_DATA (ulimit -d)"}}) {
    struct rlimit r {};
    if (getrlimit(resource, &r) == 0 && r.rlim_cur != RLIM_INFINITY && r.rlim_cur < limit.bytes) {
      limit = {static_cast<std::uint64_t>(r.rlim_cur), name};
    }
  }
  return limit;
}

std::string human_bytes(std::uint64_t bytes) {
  constexpr const char* kUnits[] = {"B", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  double value = static_cast<double>(bytes);
  std::size_t unit = 0;
  while (value >= 1024 && unit + 1 < std::size(kUnits)) value /= 1024, ++unit;
  char text[32];
  std::snprintf(text, sizeof text, unit == 0 ? "%.0f %s" : "%.1f %s", value, kUnits[unit]);
  return text;
}

void require_memory(std::string_view who, std::uint64_t need, std::string_view what) {
  const MemoryLimit limit = available_memory();
  if (need <= limit.bytes) return;
  throw OutOfMemory(std::string(who) + " needs " + std::to_string(need) + " bytes (" +
                    human_bytes(need) + ") for " + std::string(what) + ", more than the " +
                    std::to_string(limit.bytes) + " bytes (" + human_bytes(limit.bytes) +
                    ") available (" + limit.source + ")");
}

}  // namespace netsparse::support

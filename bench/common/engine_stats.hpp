// ns_stats_json of a context, parsed: the engine's statistics and effective configuration as a
// JSON document (docs/api.md), for the benchmarks that read a field NS_STAT does not carry.
#pragma once

#include <string>

#include "netsparse/netsparse.h"
#include "report.hpp"

namespace netsparse::bench {

// null when the library wrote nothing; throws std::runtime_error if it is not JSON.
inline Json engine_stats_json(const ns_context* ctx) {
  const int n = ns_stats_json(ctx, nullptr, 0);
  if (n <= 0) return nullptr;
  std::string text(static_cast<std::size_t>(n) + 1, '\0');
  ns_stats_json(ctx, text.data(), text.size());
  text.resize(static_cast<std::size_t>(n));
  return parse_json(text, "ns_stats_json");
}

}  // namespace netsparse::bench

// ns_stats_json of a context, parsed: the engine's statistics and effective configuration as a
// JSON document (docs/api.md), for the benchmarks that read a field NS_STAT does not carry.
#pragma once

#include <string>

#include "netsparse/netsparse.hpp"
#include "report.hpp"

namespace netsparse::bench {

// null when the library wrote nothing (or the context is gone); throws std::runtime_error if it
// is not JSON. The copy is netsparse::stats_json's (retried until the document fits).
inline Json engine_stats_json(const ns_context* ctx) {
  std::string text;
  try {
    text = netsparse::stats_json(ctx);
  } catch (const netsparse::Error&) {
    return nullptr;
  }
  if (text.empty()) return nullptr;
  return parse_json(text, "ns_stats_json");
}

}  // namespace netsparse::bench

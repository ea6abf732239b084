// ns_stats_json of a context, parsed: the engine's statistics and effective configuration as a
// JSON document (docs/api.md), for the benchmarks that read a field NS_STAT does not carry.
#pragma once

#include <string>

#include "netsparse/netsparse.h"
#include "report.hpp"

namespace netsparse::bench {

// null when the library wrote nothing; throws std::runtime_error if it is not JSON. The
// document can grow between the size query and the copy (a peer's traffic moves the counters:
// seen in the soft-RoCE guest, a document cut at its first length), so the copy is retried
// until it fits, with room to spare, as Context::stats_json does.
inline Json engine_stats_json(const ns_context* ctx) {
  int n = ns_stats_json(ctx, nullptr, 0);
  if (n <= 0) return nullptr;
  std::string text;
  for (;;) {
    text.assign(static_cast<std::size_t>(n) + 256, '\0');
    const int got = ns_stats_json(ctx, text.data(), text.size());
    if (got <= 0) return nullptr;
    if (static_cast<std::size_t>(got) < text.size()) {
      text.resize(static_cast<std::size_t>(got));
      return parse_json(text, "ns_stats_json");
    }
    n = got;
  }
}

}  // namespace netsparse::bench

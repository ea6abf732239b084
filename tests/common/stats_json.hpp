// ns_stats_json of a context, whole: the copy is retried until the document fits, since a
// peer's traffic can grow it between the size query and the copy (the counters move).
#pragma once

#include <algorithm>
#include <string>

#include "netsparse/netsparse.h"

namespace netsparse::test {

inline std::string stats_json_whole(const ns_context* ctx) {
  std::string text;
  for (int need = std::max(ns_stats_json(ctx, nullptr, 0), 0);;) {
    text.assign(static_cast<std::size_t>(need) + 256, '\0');
    const int got = ns_stats_json(ctx, text.data(), text.size());
    if (got < 0) return {};
    if (static_cast<std::size_t>(got) < text.size()) {
      text.resize(static_cast<std::size_t>(got));
      return text;
    }
    need = got;
  }
}

}  // namespace netsparse::test

// ns_stats_json of a context, whole, for tests: netsparse::stats_json (retried until the
// document fits, since a peer's traffic can grow it between the size query and the copy), and
// "" where the library refuses (a test then fails on the missing field, not on an exception).
#pragma once

#include <string>

#include "netsparse/netsparse.hpp"

namespace netsparse::test {

inline std::string stats_json_whole(const ns_context* ctx) {
  try {
    return netsparse::stats_json(ctx);
  } catch (const netsparse::Error&) {
    return {};
  }
}

}  // namespace netsparse::test

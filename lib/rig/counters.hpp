// The units' counter sets: plain structs of std::uint64_t counts that the engine sums over its
// units for ns_stat_get / ns_stats_json. Each set names its fields once, in a static
// `fields(self)` returning std::tie of them; adding one set into another is written here once.
#pragma once

#include <cstddef>
#include <cstdint>
#include <tuple>
#include <utility>

namespace netsparse::rig {

// a += b, field by field, for a counter set C with a static `fields(C&)` (see above). A set
// whose `fields` forgets one of its counters does not compile.
template <class C>
void add_counters(C& a, const C& b) noexcept {
  auto into = C::fields(a);
  const auto from = C::fields(b);
  static_assert(sizeof(C) == std::tuple_size_v<decltype(into)> * sizeof(std::uint64_t),
                "a counter set's fields() names every one of its std::uint64_t counters");
  [&]<std::size_t... I>(std::index_sequence<I...>) {
    ((std::get<I>(into) += std::get<I>(from)), ...);
  }
  (std::make_index_sequence<std::tuple_size_v<decltype(into)>>{});
}

}  // namespace netsparse::rig

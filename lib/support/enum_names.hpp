// The names of an enum's values: one table of (value, name) per enum and one lookup, instead of
// a switch per enum. The lookup checks its table when it is compiled: the values are distinct,
// and every enumerator the compiler knows near the table's values has a name, so an enumerator
// added without one fails to compile (what -Wswitch did for the switches). Header-only and
// standard library only: every component may include it (the bottom of the layers).
#pragma once

#include <array>
#include <cstddef>
#include <optional>
#include <string>
#include <string_view>
#include <type_traits>
#include <utility>

namespace netsparse::support {

template <class Key>
struct EnumName {
  Key value;
  const char* name;
};
template <class Key>
EnumName(Key, const char*) -> EnumName<Key>;  // for compilers without aggregate deduction

namespace detail {

// Whether V is a named enumerator of its type. GCC and Clang write a template argument of
// enumeration type in the function's signature as its qualified name ("ns::Kind::kA",
// "<unnamed>::Kind::kA", "NS_OK") when it has one and as a cast otherwise ("(ns::Kind)7"), so
// the last token of the argument tells: an identifier, or a number.
template <auto V>
constexpr bool is_named_enumerator() noexcept {
  constexpr std::string_view signature = __PRETTY_FUNCTION__;
  constexpr std::size_t at = signature.rfind("V = ");
  static_assert(at != std::string_view::npos, "unknown compiler: no \"V = \" in the signature");
  constexpr std::size_t end = signature.find_first_of("];", at);
  const auto word_char = [](char c) {
    return c == '_' || (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9');
  };
  std::size_t first = end;
  while (first > at + 4 && word_char(signature[first - 1])) --first;
  return first < end && !(signature[first] >= '0' && signature[first] <= '9');
}

// How far beyond the table's smallest and largest values enumerators are looked for: far
// enough for one appended with the next value or a round number after it.
inline constexpr long long kProbeMargin = 64;

template <const auto& Table>
constexpr bool lists(long long v) noexcept {
  for (const auto& entry : Table) {
    if (static_cast<long long>(entry.value) == v) return true;
  }
  return false;
}

template <const auto& Table>
constexpr bool values_distinct() noexcept {
  for (std::size_t i = 0; i < Table.size(); ++i) {
    for (std::size_t j = i + 1; j < Table.size(); ++j) {
      if (Table[i].value == Table[j].value) return false;
    }
  }
  return true;
}

// Every named enumerator in [min - margin, max + margin] of the table's values is listed.
// Only for scoped enums: their underlying type is fixed, so every probed value is valid.
template <const auto& Table>
constexpr bool names_every_enumerator() noexcept {
  using Key = decltype(Table[0].value);
  if constexpr (!std::is_enum_v<Key> || std::is_convertible_v<Key, long long>) {
    return true;  // an integer code or an unscoped enum: nothing to probe
  } else {
    using U = std::underlying_type_t<Key>;
    constexpr auto bounds = [] {
      long long lo = static_cast<long long>(Table[0].value), hi = lo;
      for (const auto& entry : Table) {
        const auto v = static_cast<long long>(entry.value);
        lo = v < lo ? v : lo;
        hi = v > hi ? v : hi;
      }
      return std::pair{lo - kProbeMargin, hi + kProbeMargin};
    }();
    constexpr long long lo = bounds.first;
    return []<std::size_t... I>(std::index_sequence<I...>) {
      return (
          (!is_named_enumerator<static_cast<Key>(
               static_cast<U>(lo + static_cast<long long>(I)))>() ||
           lists<Table>(static_cast<long long>(static_cast<U>(lo + static_cast<long long>(I))))) &&
          ...);
    }
    (std::make_index_sequence<static_cast<std::size_t>(bounds.second - bounds.first + 1)>{});
  }
}

}  // namespace detail

// The name of `value` in `Table` (a constexpr std::array of EnumName), or `fallback` for a value
// the table does not list: a value cast from an integer that a caller or a peer sent.
template <const auto& Table, class Key>
constexpr const char* name_of(Key value, const char* fallback) noexcept {
  static_assert(detail::values_distinct<Table>(), "a value is named twice in the name table");
  static_assert(detail::names_every_enumerator<Table>(),
                "an enumerator has no name in the name table (add it to the table)");
  for (const auto& entry : Table) {
    if (entry.value == value) return entry.name;
  }
  return fallback;
}

// The table's values in its order (a list of every value of the enum, kept by the table's check).
template <const auto& Table>
constexpr auto values_of() noexcept {
  std::array<decltype(Table[0].value), Table.size()> values{};
  for (std::size_t i = 0; i < Table.size(); ++i) values[i] = Table[i].value;
  return values;
}

// The value `Table` names `name`, or nothing: the parse that is the lookup's inverse.
template <const auto& Table>
constexpr auto value_named(std::string_view name) noexcept
    -> std::optional<decltype(Table[0].value)> {
  for (const auto& entry : Table) {
    if (name == entry.name) return entry.value;
  }
  return std::nullopt;
}

// The table's names in its order, joined by ", " (what a refusal lists as accepted).
template <const auto& Table>
std::string names_joined() {
  std::string names;
  for (const auto& entry : Table) names += (names.empty() ? "" : ", ") + std::string(entry.name);
  return names;
}

}  // namespace netsparse::support

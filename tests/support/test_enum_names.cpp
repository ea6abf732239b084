// The one enum -> name lookup (lib/support/enum_names.hpp): names found, the fallback for values
// no table lists, the compile-time probe it relies on, and the library's own tables through
// their to_string functions (every enumerator named, an out-of-range value gets the fallback).
#include <gtest/gtest.h>

#include <array>
#include <cstdint>
#include <string>

#include "collectives/communicator.hpp"
#include "concat/plan_wire.hpp"
#include "netsparse/netsparse.h"
#include "support/enum_names.hpp"
#include "transport/transport.hpp"

namespace {

using netsparse::support::EnumName;
using netsparse::support::name_of;
using netsparse::support::detail::is_named_enumerator;

enum class Colour : std::uint8_t { kRed, kGreen, kBlue };
enum class Sparse : std::uint32_t { kOne = 1, kTen = 10, kHundred = 100 };

constexpr auto kColourNames = std::to_array<EnumName<Colour>>({
    {Colour::kRed, "red"},
    {Colour::kGreen, "green"},
    {Colour::kBlue, "blue"},
});
constexpr auto kSparseNames = std::to_array<EnumName<Sparse>>({
    {Sparse::kOne, "one"},
    {Sparse::kTen, "ten"},
    {Sparse::kHundred, "hundred"},
});
constexpr auto kCodeNames = std::to_array<EnumName<int>>({{0, "zero"}, {-7, "minus seven"}});

TEST(EnumNames, NamesEveryListedValue) {
  EXPECT_STREQ(name_of<kColourNames>(Colour::kRed, "?"), "red");
  EXPECT_STREQ(name_of<kColourNames>(Colour::kBlue, "?"), "blue");
  EXPECT_STREQ(name_of<kSparseNames>(Sparse::kHundred, "?"), "hundred");
  EXPECT_STREQ(name_of<kCodeNames>(-7, "?"), "minus seven");
}

TEST(EnumNames, FallbackForValuesNotListed) {
  EXPECT_STREQ(name_of<kColourNames>(static_cast<Colour>(3), "no colour"), "no colour");
  EXPECT_STREQ(name_of<kColourNames>(static_cast<Colour>(255), "no colour"), "no colour");
  EXPECT_STREQ(name_of<kSparseNames>(static_cast<Sparse>(2), "none"), "none");
  EXPECT_STREQ(name_of<kCodeNames>(1, "not a code"), "not a code");
}

TEST(EnumNames, LookupIsAConstantExpression) {
  static_assert(std::string_view(name_of<kColourNames>(Colour::kGreen, "?")) == "green");
  static_assert(std::string_view(name_of<kSparseNames>(static_cast<Sparse>(11), "x")) == "x");
}

// The probe the coverage check stands on: named values are seen as named, casts are not.
TEST(EnumNames, ProbeTellsNamedFromUnnamed) {
  static_assert(is_named_enumerator<Colour::kRed>());
  static_assert(is_named_enumerator<Sparse::kHundred>());
  static_assert(!is_named_enumerator<static_cast<Colour>(3)>());
  static_assert(!is_named_enumerator<static_cast<Sparse>(0)>());
  static_assert(is_named_enumerator<NS_WR_RIS>());  // an unscoped C enumerator
  SUCCEED();
}

// The library's tables, through the functions that use them.
TEST(EnumNames, LibraryTablesNameTheirEnums) {
  namespace tr = netsparse::transport;
  namespace co = netsparse::collectives;
  EXPECT_STREQ(tr::to_string(tr::TransportKind::kVerbs), "verbs");
  EXPECT_STREQ(tr::to_string(static_cast<tr::TransportKind>(42)), "unknown");
  EXPECT_STREQ(tr::to_string(tr::TxStatus::kPeerFailed), "peer failed");
  EXPECT_STREQ(co::to_string(co::Algorithm::kMultiBuffer4), "multi_buffer_4");
  EXPECT_STREQ(co::to_string(static_cast<co::Algorithm>(200)), "unknown algorithm");
  EXPECT_STREQ(netsparse::concat::to_string(netsparse::concat::PlanRefusal::kBadList),
               "the plan's list arrived incomplete or with the wrong length");
  EXPECT_STREQ(netsparse::concat::to_string(static_cast<netsparse::concat::PlanRefusal>(0)),
               "unknown plan refusal");
  EXPECT_STREQ(ns_status_str(NS_ERR_STATE), "invalid state");
  EXPECT_STREQ(ns_status_str(-100), "unknown status");
  EXPECT_STREQ(ns_wr_opcode_str(NS_WR_RIG_PLAN), "RIG_PLAN");
}

}  // namespace

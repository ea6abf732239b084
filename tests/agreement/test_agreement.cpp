// The argument-agreement record without MPI: every rank's record is built here and judged the
// way each rank judges the gathered set.
#include <gtest/gtest.h>

#include <cstring>
#include <string>
#include <vector>

#include "agreement/agreement.hpp"

namespace ag = netsparse::agreement;

namespace {

// The gathered records of `ranks`, judged by rank `judge_as`.
ag::Verdict judge(const std::vector<ag::Agreement>& ranks, std::size_t judge_as = 0) {
  std::vector<std::byte> all;
  for (const ag::Agreement& a : ranks) {
    const std::vector<std::byte> r = a.record();
    EXPECT_EQ(r.size(), a.record_bytes());
    all.insert(all.end(), r.begin(), r.end());
  }
  return ranks[judge_as].judge(all, static_cast<int>(ranks.size()));
}

ag::Agreement settings(std::uint64_t packet, const std::string& mode) {
  ag::Agreement a;
  a.field("packet_bytes", packet);
  a.field("progress_mode", mode);
  return a;
}

}  // namespace

TEST(Agreement, EqualFieldsAgree) {
  const std::vector<ag::Agreement> ranks = {settings(4096, "INLINE"), settings(4096, "INLINE"),
                                            settings(4096, "INLINE")};
  const ag::Verdict v = judge(ranks, 2);
  EXPECT_TRUE(v.ok()) << v.reason;
  EXPECT_FALSE(v.refused);
  EXPECT_EQ(ranks[0].digest(), ranks[2].digest());
}

TEST(Agreement, FirstDifferingFieldNamesBothValues) {
  const std::vector<ag::Agreement> ranks = {settings(4096, "INLINE"), settings(4096, "THREAD"),
                                            settings(1500, "THREAD")};
  EXPECT_NE(ranks[0].digest(), ranks[2].digest());
  for (std::size_t judge_as = 0; judge_as < ranks.size(); ++judge_as) {
    const ag::Verdict v = judge(ranks, judge_as);
    EXPECT_FALSE(v.ok());
    EXPECT_FALSE(v.refused);
    EXPECT_EQ(v.rank, 2);
    EXPECT_EQ(v.reason,
              "ranks disagree on packet_bytes: rank 0 has 4096, rank 2 has 1500 (it must be the "
              "same on every rank)");
  }
}

TEST(Agreement, HiddenFieldNamesRanksOnly) {
  ag::Agreement a, b;
  a.field("row_offsets", "0 100 200", /*show=*/false);
  b.field("row_offsets", "0 99 200", /*show=*/false);
  const ag::Verdict v = judge({a, b});
  EXPECT_EQ(v.reason,
            "ranks disagree on row_offsets (rank 0 and rank 1 differ; it must be the same on every "
            "rank)");
}

TEST(Agreement, ValuesBeyondTheShownPrefixStillCompare) {
  const std::string common(ag::Agreement::kShownBytes + 10, 'x');
  ag::Agreement a, b;
  a.field("table", common + "1");
  b.field("table", common + "2");
  const ag::Verdict v = judge({a, b});
  EXPECT_FALSE(v.ok());
  EXPECT_NE(v.reason.find("ranks disagree on table"), std::string::npos) << v.reason;
}

TEST(Agreement, LowestRefusingRankWinsOverDisagreement) {
  std::vector<ag::Agreement> ranks = {settings(4096, "INLINE"), settings(1500, "INLINE"),
                                      settings(4096, "INLINE"), settings(4096, "INLINE")};
  ranks[3].refuse(-6, "no RDMA device");
  ranks[2].refuse(-1, "prop_bytes is 0");
  ranks[2].refuse(-4, "a later reason is not kept");
  EXPECT_TRUE(ranks[2].refused());
  EXPECT_EQ(ranks[2].reason(), "prop_bytes is 0");
  const ag::Verdict v = judge(ranks, 1);
  EXPECT_TRUE(v.refused);
  EXPECT_EQ(v.rank, 2);
  EXPECT_EQ(v.status, -1);
  EXPECT_EQ(v.what, "prop_bytes is 0");
  EXPECT_EQ(v.reason, "rank 2: prop_bytes is 0");
}

TEST(Agreement, LongReasonIsCutNotOverrun) {
  ag::Agreement a;
  a.refuse(1, std::string(3 * ag::Agreement::kReasonBytes, 'r'));
  const ag::Verdict v = judge({a, ag::Agreement{}});
  EXPECT_EQ(v.what.size(), ag::Agreement::kReasonBytes);
}

TEST(Agreement, RefusesMisuse) {
  ag::Agreement a;
  EXPECT_THROW(a.refuse(0, "status 0 means no refusal"), std::invalid_argument);
  const std::vector<std::byte> one = a.record();
  EXPECT_THROW((void)a.judge(one, 2), std::invalid_argument);  // two ranks, one record
  EXPECT_THROW((void)a.judge(one, 0), std::invalid_argument);
}

TEST(Agreement, SettleCallsTheExchangeOnce) {
  const ag::Agreement a = settings(64, "AUTO");
  int calls = 0;
  const ag::Verdict v = a.settle(3, [&](const void* mine, std::size_t bytes, void* all) {
    ++calls;
    for (int r = 0; r < 3; ++r) std::memcpy(static_cast<std::byte*>(all) + r * bytes, mine, bytes);
  });
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(v.ok()) << v.reason;
}

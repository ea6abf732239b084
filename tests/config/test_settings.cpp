// The configuration table: defaults, typed reads, and refusals that name the variable.
#include <gtest/gtest.h>

#include <algorithm>
#include <cstdlib>
#include <set>
#include <stdexcept>
#include <string>
#include <vector>

#include "config/settings.hpp"

namespace cfg = netsparse::config;

namespace {

// Leaves the process environment as it found it.
class ConfigEnv : public ::testing::Test {
 protected:
  void SetUp() override {
    for (const cfg::Setting& s : cfg::kEnvironment) ::unsetenv(s.name);
  }
  void TearDown() override { SetUp(); }
};

// The message of the exception a read of `e` throws with `value` set ("" if none).
std::string refusal(cfg::Env e, const char* value) {
  ::setenv(cfg::setting(e).name, value, 1);
  try {
    (void)cfg::effective(e);
  } catch (const std::invalid_argument& err) {
    return err.what();
  }
  return {};
}

}  // namespace

TEST_F(ConfigEnv, EveryNameIsUniqueAndEveryDefaultIsValid) {
  std::set<std::string> names;
  for (int i = 0; i < static_cast<int>(cfg::Env::kCount); ++i) {
    const auto e = static_cast<cfg::Env>(i);
    const cfg::Setting& s = cfg::setting(e);
    EXPECT_TRUE(names.insert(s.name).second) << s.name;
    EXPECT_EQ(std::string(s.name).rfind("NETSPARSE_", 0), 0u) << s.name;
    EXPECT_NE(std::string(s.doc), "") << s.name;
    if (s.default_text[0] != '\0') {  // the default, written out, is accepted as it stands
      ::setenv(s.name, s.default_text, 1);
      EXPECT_NO_THROW((void)cfg::effective(e)) << s.name;
      ::unsetenv(s.name);
    }
    EXPECT_EQ(cfg::effective(e), s.default_text) << s.name;
  }
  EXPECT_EQ(cfg::first_error(cfg::Scope::kLibrary), "");
  EXPECT_EQ(cfg::first_error(cfg::Scope::kBenchmark), "");
}

TEST_F(ConfigEnv, TypedReads) {
  ::setenv("NETSPARSE_MPI_MESSAGE_BYTES", "4096", 1);
  EXPECT_EQ(cfg::integer(cfg::Env::kMpiMessageBytes), 4096);
  ::setenv("NETSPARSE_MPI_READS", "messages", 1);
  EXPECT_EQ(cfg::choice(cfg::Env::kMpiReads), "messages");
  ::setenv("NETSPARSE_PRESUME_DEAD_S", "0.5", 1);
  EXPECT_DOUBLE_EQ(cfg::real(cfg::Env::kPresumeDeadS), 0.5);
  ::setenv("NETSPARSE_IB_DEVICE", "rxe0", 1);
  EXPECT_EQ(cfg::text(cfg::Env::kIbDevice), "rxe0");
  EXPECT_EQ(cfg::integer(cfg::Env::kProgressIntervalNs), 5000);  // unset: the default
  ::setenv("NETSPARSE_PROGRESS_INTERVAL_NS", "", 1);             // empty = unset
  EXPECT_FALSE(cfg::is_set(cfg::Env::kProgressIntervalNs));
  EXPECT_EQ(cfg::integer(cfg::Env::kProgressIntervalNs), 5000);
}

// The values issue 21 found accepted silently, and the usual malformed ones.
TEST_F(ConfigEnv, BadValuesAreRefusedNamingTheVariable) {
  const struct {
    cfg::Env env;
    const char* value;
  } cases[] = {
      {cfg::Env::kProgressIntervalNs, "-1"},
      {cfg::Env::kBenchStallS, "abc"},
      {cfg::Env::kBenchStallS, "10s"},
      {cfg::Env::kMpiShm, "yes"},
      {cfg::Env::kMpiReads, "sideways"},
      {cfg::Env::kMpiMessageBytes, "8"},
      {cfg::Env::kMpiMessageBytes, " 4096"},
      {cfg::Env::kMpiMessageBytes, "+4096"},
      {cfg::Env::kMpiMessageBytes, "99999999999999999999999"},
      {cfg::Env::kPresumeDeadS, "0"},
      {cfg::Env::kPresumeDeadS, "nan"},
      {cfg::Env::kPresumeDeadS, "inf"},
      {cfg::Env::kMaxContextBytes, "0"},
      {cfg::Env::kMaxContextBytes, "1G"},
      {cfg::Env::kTransport, "carrier-pigeon"},
      {cfg::Env::kEngineProfile, "yes"},
      {cfg::Env::kKernelIsa, "sse9"},
      {cfg::Env::kIbGidIndex, "-2"},
  };
  for (const auto& c : cases) {
    const std::string why = refusal(c.env, c.value);
    const std::string name = cfg::setting(c.env).name;
    EXPECT_NE(why.find(name + "='" + c.value + "'"), std::string::npos)
        << name << "=" << c.value << " -> '" << why << "'";
    EXPECT_NE(why.find("is not"), std::string::npos) << why;
    const cfg::Scope scope = cfg::setting(c.env).scope;
    EXPECT_EQ(cfg::first_error(scope), why);
    ::unsetenv(name.c_str());
  }
}

TEST_F(ConfigEnv, AgreedValuesFollowTheTable) {
  const auto names = cfg::agreed_names();
  ASSERT_EQ(names.size(), cfg::kAgreedCount);
  ::setenv("NETSPARSE_MPI_SHM", "0", 1);
  const auto values = cfg::agreed_values();
  ASSERT_EQ(values.size(), names.size());
  bool shm_seen = false;
  for (std::size_t i = 0; i < values.size(); ++i) {
    EXPECT_EQ(names[i], values[i].first);
    if (names[i] == "NETSPARSE_MPI_SHM") {
      shm_seen = true;
      EXPECT_EQ(values[i].second, "0");
    }
  }
  EXPECT_TRUE(shm_seen);
}

// A misspelt name is reported with the setting it most likely meant; a far-off name without a
// guess; set settings and the scripts' and tests' own names are not reported.
TEST_F(ConfigEnv, UnknownNamesAreReportedWithTheNearestSetting) {
  const char* const typo = "NETSPARSE_RANKS_PER_HSOT";
  const char* const stranger = "NETSPARSE_ZZZZZZZZZZZZZZZZZZZZ";
  const std::vector<std::string> before = cfg::unknown_names();  // whatever the caller set
  ::setenv(typo, "4", 1);
  ::setenv(stranger, "1", 1);
  ::setenv("NETSPARSE_RANKS_PER_HOST", "4", 1);
  ::setenv("NETSPARSE_TEST_SOMETHING", "1", 1);
  ::setenv("NETSPARSE_JOBS", "2", 1);
  const std::vector<std::string> after = cfg::unknown_names();
  ::unsetenv(typo);
  ::unsetenv(stranger);
  ::unsetenv("NETSPARSE_TEST_SOMETHING");
  ::unsetenv("NETSPARSE_JOBS");
  std::vector<std::string> added;
  for (const std::string& line : after) {
    if (std::find(before.begin(), before.end(), line) == before.end()) added.push_back(line);
  }
  ASSERT_EQ(added.size(), 2u) << ::testing::PrintToString(added);
  // Sorted: RANKS before ZZZ.
  EXPECT_EQ(added[0], std::string(typo) +
                          " is set but is not a NetSparse setting (did you mean "
                          "NETSPARSE_RANKS_PER_HOST?)");
  EXPECT_EQ(added[1], std::string(stranger) + " is set but is not a NetSparse setting");
  EXPECT_EQ(cfg::unknown_names(), before);
}

TEST(ConfigAttributes, DefaultsLieInTheirRanges) {
  for (const cfg::Attribute& a : cfg::kAttributes) {
    EXPECT_GE(a.def, a.lo) << a.name;
    EXPECT_LE(a.def, a.hi) << a.name;
    EXPECT_EQ(std::string(a.mask).rfind("NS_CTX_ATTR_", 0), 0u) << a.name;
  }
}

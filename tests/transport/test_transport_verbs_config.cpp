// The verbs transport's pure decisions (GID choice, timeout arithmetic, option parsing, error
// text): testable on any host, with or without an RDMA device.
#include <gtest/gtest.h>

#include <cstdlib>
#include <string>
#include <vector>

#include "transport/transport_factory.hpp"
#include "transport/verbs_config.hpp"

namespace netsparse::transport {
namespace {

std::array<std::uint8_t, 16> ipv4_mapped(std::uint8_t a, std::uint8_t b, std::uint8_t c,
                                         std::uint8_t d) {
  return {0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0xff, 0xff, a, b, c, d};
}

std::array<std::uint8_t, 16> link_local() {
  return {0xfe, 0x80, 0, 0, 0, 0, 0, 0, 0x02, 0x11, 0x22, 0xff, 0xfe, 0x33, 0x44, 0x55};
}

TEST(VerbsGid, Ipv4MappedIsRecognized) {
  EXPECT_TRUE(gid_is_ipv4_mapped(ipv4_mapped(10, 0, 0, 1)));
  EXPECT_FALSE(gid_is_ipv4_mapped(link_local()));
  auto almost = ipv4_mapped(10, 0, 0, 1);
  almost[11] = 0xfe;
  EXPECT_FALSE(gid_is_ipv4_mapped(almost));
  almost = ipv4_mapped(10, 0, 0, 1);
  almost[3] = 1;
  EXPECT_FALSE(gid_is_ipv4_mapped(almost));
}

TEST(VerbsGid, PrefersRoceV2Ipv4Mapped) {
  // The soft-RoCE table: 0 = link-local (v1), 1 = link-local (v2), 2 = IPv4 (v1), 3 = IPv4 (v2).
  const std::vector<GidEntry> rxe = {
      {0, link_local(), GidType::kRoceV1},
      {1, link_local(), GidType::kRoceV2},
      {2, ipv4_mapped(192, 168, 1, 2), GidType::kRoceV1},
      {3, ipv4_mapped(192, 168, 1, 2), GidType::kRoceV2},
  };
  EXPECT_EQ(choose_gid_index(rxe), 3);
}

TEST(VerbsGid, LowestIndexWinsAndOrderDoesNotMatter) {
  const std::vector<GidEntry> entries = {
      {7, ipv4_mapped(10, 0, 0, 2), GidType::kRoceV2},
      {0, link_local(), GidType::kRoceV1},
      {5, ipv4_mapped(10, 0, 0, 1), GidType::kRoceV2},
  };
  EXPECT_EQ(choose_gid_index(entries), 5);
}

TEST(VerbsGid, FallsBackToIndexZero) {
  EXPECT_EQ(choose_gid_index({}), 0);
  const std::vector<GidEntry> ib = {{0, link_local(), GidType::kIb},
                                    {1, link_local(), GidType::kIb}};
  EXPECT_EQ(choose_gid_index(ib), 0);
  // IPv4-mapped but RoCE v1 is not routable: not chosen.
  const std::vector<GidEntry> v1 = {{0, link_local(), GidType::kRoceV1},
                                    {1, ipv4_mapped(10, 1, 1, 1), GidType::kRoceV1}};
  EXPECT_EQ(choose_gid_index(v1), 0);
  // RoCE v2 with an IPv6 address only: index 0.
  const std::vector<GidEntry> v6 = {{0, link_local(), GidType::kRoceV1},
                                    {1, link_local(), GidType::kRoceV2}};
  EXPECT_EQ(choose_gid_index(v6), 0);
}

TEST(VerbsGid, PrintsColonGroups) {
  EXPECT_EQ(gid_to_string(ipv4_mapped(192, 168, 0, 1)), "0000:0000:0000:0000:0000:ffff:c0a8:0001");
}

TEST(VerbsTimeout, ExponentCoversTheRequestedDetectionTime) {
  for (int ms : {1, 10, 100, 500, 1000, 1500, 2000, 10000}) {
    for (int retries : {0, 3, 7}) {
      const int t = rc_timeout_exponent(ms, retries);
      ASSERT_GE(t, 1);
      ASSERT_LE(t, 31);
      EXPECT_GE(rc_detection_ms(t, retries), ms) << ms << " ms, " << retries << " retries";
      // ... and is the smallest such exponent.
      if (t > 1) {
        EXPECT_LT(rc_detection_ms(t - 1, retries), ms) << ms << " ms";
      }
    }
  }
  // Default 1 s over 8 attempts -> 4.096 us * 2^15 = 134 ms per attempt, 1.07 s in total.
  EXPECT_EQ(rc_timeout_exponent(VerbsOptions{}.peer_timeout_ms, 7), 15);
  EXPECT_NEAR(rc_detection_ms(15, 7), 1073.7, 0.1);
  EXPECT_EQ(rc_timeout_exponent(1, 7), 5);   // 125 us per attempt -> 4.096 us * 2^5 = 131 us
  EXPECT_EQ(rc_timeout_exponent(-5, 0), 8);  // nonsense times are treated as 1 ms
  EXPECT_EQ(rc_timeout_exponent(1 << 30, 0), 31);
}

TEST(VerbsMtu, EnumToBytes) {
  EXPECT_EQ(mtu_enum_to_bytes(1), 256u);
  EXPECT_EQ(mtu_enum_to_bytes(3), 1024u);
  EXPECT_EQ(mtu_enum_to_bytes(5), 4096u);
  EXPECT_EQ(mtu_enum_to_bytes(0), 0u);
  EXPECT_EQ(mtu_enum_to_bytes(6), 0u);
}

class VerbsEnv : public ::testing::Test {
 protected:
  void TearDown() override {
    for (const char* v : {"NETSPARSE_IB_DEVICE", "NETSPARSE_IB_PORT", "NETSPARSE_IB_GID_INDEX",
                          "NETSPARSE_IB_MAX_PACKET", "NETSPARSE_IB_PEER_TIMEOUT_MS"}) {
      ::unsetenv(v);
    }
  }
};

TEST_F(VerbsEnv, DefaultsWithoutVariables) {
  const VerbsOptions o = VerbsOptions::from_env();
  EXPECT_EQ(o.device, "");
  EXPECT_EQ(o.port, 0);
  EXPECT_EQ(o.gid_index, -1);
  EXPECT_EQ(o.max_packet_bytes, 4096u);
  EXPECT_NO_THROW(o.validate());
}

TEST_F(VerbsEnv, VariablesOverrideFields) {
  ::setenv("NETSPARSE_IB_DEVICE", "rxe0", 1);
  ::setenv("NETSPARSE_IB_PORT", "1", 1);
  ::setenv("NETSPARSE_IB_GID_INDEX", "1", 1);
  ::setenv("NETSPARSE_IB_MAX_PACKET", "8192", 1);
  ::setenv("NETSPARSE_IB_PEER_TIMEOUT_MS", "250", 1);
  VerbsOptions o;
  o.recv_buffers = 77;  // untouched by the environment
  o.apply_env();
  EXPECT_EQ(o.device, "rxe0");
  EXPECT_EQ(o.port, 1);
  EXPECT_EQ(o.gid_index, 1);
  EXPECT_EQ(o.max_packet_bytes, 8192u);
  EXPECT_EQ(o.peer_timeout_ms, 250);
  EXPECT_EQ(o.recv_buffers, 77);
}

TEST_F(VerbsEnv, MalformedValuesNameTheVariable) {
  for (const char* bad : {"abc", "1x", "-2", "99999999999999999999", " 1"}) {
    ::setenv("NETSPARSE_IB_GID_INDEX", bad, 1);
    try {
      VerbsOptions::from_env();
      ADD_FAILURE() << "accepted NETSPARSE_IB_GID_INDEX=" << bad;
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find("NETSPARSE_IB_GID_INDEX"), std::string::npos);
    }
  }
  ::unsetenv("NETSPARSE_IB_GID_INDEX");
  ::setenv("NETSPARSE_IB_MAX_PACKET", "8", 1);  // below the 64-byte floor
  EXPECT_THROW(VerbsOptions::from_env(), std::invalid_argument);
}

TEST(VerbsOptionsValidate, OutOfRangeFieldsAreNamed) {
  // Default options with one field set out of range by `set`: validate() names that field.
  auto expect_named = [](void (*set)(VerbsOptions&), const char* field) {
    VerbsOptions o;
    set(o);
    try {
      o.validate();
      ADD_FAILURE() << field << " accepted";
    } catch (const std::invalid_argument& e) {
      EXPECT_NE(std::string(e.what()).find(field), std::string::npos) << e.what();
    }
  };
  expect_named([](VerbsOptions& o) { o.retry_count = 8; }, "retry_count");
  expect_named([](VerbsOptions& o) { o.signal_every = 0; }, "signal_every");
  expect_named([](VerbsOptions& o) { o.max_packet_bytes = 16; }, "max_packet_bytes");
  expect_named([](VerbsOptions& o) { o.send_queue_depth = 1; }, "send_queue_depth");
  expect_named([](VerbsOptions& o) { o.gid_index = -5; }, "gid_index");
}

TEST(VerbsErrors, NoDeviceMessageSaysWhatToDo) {
  const std::string m = no_rdma_device_message("ibv_get_device_list found no device");
  EXPECT_NE(m.find("no RDMA device"), std::string::npos);
  EXPECT_NE(m.find("ibv_get_device_list found no device"), std::string::npos);
  EXPECT_NE(m.find("NETSPARSE_TRANSPORT=mpi"), std::string::npos);
  EXPECT_NE(m.find("rxe"), std::string::npos);
}

TEST(VerbsErrors, DeviceProbeDoesNotThrow) {
  // On this host there may or may not be a device; the probe must simply answer.
  const bool available = verbs_device_available();
  if (!verbs_compiled_in()) {
    EXPECT_FALSE(available);
  }
  std::printf("verbs compiled in: %s, device with an ACTIVE port: %s\n",
              verbs_compiled_in() ? "yes" : "no", available ? "yes" : "no");
}

}  // namespace
}  // namespace netsparse::transport

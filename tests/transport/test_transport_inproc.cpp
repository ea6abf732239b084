// The in-process fabric: node threads, exact delivery, backpressure, reads, simulated death.
#include <gtest/gtest.h>

#include <functional>
#include <string>
#include <thread>
#include <vector>

#include "transport/transport.hpp"
#include "transport_checks.hpp"

namespace netsparse::transport {
namespace {

using namespace testing;  // the conformance checks (transport_checks.hpp)

// Runs body(endpoint) on one thread per node; returns "node r: error" lines.
std::string run_nodes(InprocFabric& fabric, const std::function<std::string(Transport&)>& body) {
  const int n = fabric.nodes();
  std::vector<std::unique_ptr<Transport>> endpoints;
  for (int r = 0; r < n; ++r) endpoints.push_back(fabric.endpoint(r));
  std::vector<std::string> errors(static_cast<std::size_t>(n));
  {
    std::vector<std::jthread> threads;
    for (int r = 0; r < n; ++r) {
      threads.emplace_back([&, r] { errors[r] = body(*endpoints[static_cast<std::size_t>(r)]); });
    }
  }
  std::string all;
  for (int r = 0; r < n; ++r) {
    if (!errors[static_cast<std::size_t>(r)].empty()) {
      all += "node " + std::to_string(r) + ": " + errors[static_cast<std::size_t>(r)] + "\n";
    }
  }
  return all;
}

std::vector<std::byte> packet_of(std::uint32_t value, std::size_t bytes = 8) {
  std::vector<std::byte> p(bytes);
  std::memcpy(p.data(), &value, sizeof value);
  return p;
}

std::uint32_t value_of(const ReceivedPacket& p) {
  std::uint32_t v = 0;
  std::memcpy(&v, p.bytes.data(), sizeof v);
  return v;
}

class InprocAllToAll : public ::testing::TestWithParam<int> {};

TEST_P(InprocAllToAll, EveryByteArrivesOnceInOrder) {
  InprocFabric fabric(GetParam());
  const std::string errors = run_nodes(fabric, [](Transport& t) {
    std::string e = send_validation_check(t);
    if (!e.empty()) return e;
    ExchangeConfig cfg;
    cfg.packets_per_peer = 300;
    cfg.seed = 11 + static_cast<std::uint64_t>(t.size());
    const auto result = all_to_all(t, cfg);
    t.barrier();
    if (result.error.empty() && t.bytes_sent() == 0) return std::string("bytes_sent() is 0");
    return result.error;
  });
  EXPECT_EQ(errors, "");
}

// Tiny mailboxes: senders hit kNoResource constantly and must still deliver everything in order.
TEST_P(InprocAllToAll, TinyMailboxesStillDeliverEverything) {
  InprocOptions options;
  options.mailbox_packets = 2;
  options.max_packet_bytes = 256;
  InprocFabric fabric(GetParam(), options);
  const std::string errors = run_nodes(fabric, [](Transport& t) {
    ExchangeConfig cfg;
    cfg.packets_per_peer = 200;
    cfg.poll_batch = 1;
    const auto result = all_to_all(t, cfg);
    t.barrier();
    return result.error;
  });
  EXPECT_EQ(errors, "");
}

TEST_P(InprocAllToAll, ReadsReturnExactBytesAndRejectOutOfRange) {
  InprocOptions options;
  options.max_outstanding_reads = 16;  // exercises the kNoResource path of read()
  InprocFabric fabric(GetParam(), options);
  const std::string errors = run_nodes(fabric, [](Transport& t) {
    ReadCheckConfig cfg;
    cfg.reads = 1500;
    return read_check(t, cfg);
  });
  EXPECT_EQ(errors, "");
}

INSTANTIATE_TEST_SUITE_P(Nodes, InprocAllToAll, ::testing::Values(2, 3, 5, 8),
                         [](const auto& info) { return std::to_string(info.param) + "nodes"; });

TEST(InprocTransport, FullMailboxGivesNoResourceUntilDrained) {
  InprocOptions options;
  options.mailbox_packets = 8;
  InprocFabric fabric(2, options);
  auto a = fabric.endpoint(0);
  auto b = fabric.endpoint(1);
  std::uint32_t sent = 0;
  while (a->send(1, packet_of(sent)) == TxStatus::kOk) ++sent;
  EXPECT_EQ(sent, 8u) << "a mailbox of 8 packets must take exactly 8";
  EXPECT_EQ(a->send(1, packet_of(sent)), TxStatus::kNoResource);
  // Other destinations are not affected by one full mailbox.
  EXPECT_EQ(a->send(0, packet_of(1000)), TxStatus::kOk);

  std::vector<std::uint32_t> got;
  auto collect = [&](const ReceivedPacket& p) {
    EXPECT_EQ(p.src, 0);
    got.push_back(value_of(p));
  };
  EXPECT_EQ(b->poll(collect, 3), 3);
  for (int k = 0; k < 3; ++k) EXPECT_EQ(a->send(1, packet_of(sent++)), TxStatus::kOk);
  EXPECT_EQ(a->send(1, packet_of(sent)), TxStatus::kNoResource);
  while (b->poll(collect, 4) > 0) {
  }
  ASSERT_EQ(got.size(), 11u);
  for (std::uint32_t i = 0; i < got.size(); ++i) EXPECT_EQ(got[i], i);
  EXPECT_EQ(a->poll([&](const ReceivedPacket& p) { EXPECT_EQ(value_of(p), 1000u); }, 8), 1);
}

TEST(InprocTransport, SilentKillDropsTrafficAndReportsNothing) {
  InprocFabric fabric(3);
  auto n0 = fabric.endpoint(0);
  auto n1 = fabric.endpoint(1);
  auto n2 = fabric.endpoint(2);
  std::vector<std::byte> region(64, std::byte{5});
  std::vector<std::unique_ptr<Transport>*> all = {&n0, &n1, &n2};
  // register_memory is collective: run it on three threads.
  std::vector<int> ids(3);
  {
    std::vector<std::jthread> threads;
    for (int r = 0; r < 3; ++r) {
      threads.emplace_back([&, r] { ids[r] = (*all[r])->register_memory(region.data(), 64); });
    }
  }
  ASSERT_EQ(ids[0], ids[1]);
  ASSERT_EQ(ids[1], ids[2]);
  ASSERT_EQ(n2->send(0, packet_of(7)), TxStatus::kOk);  // on the wire before the death
  ASSERT_EQ(n0->send(2, packet_of(8)), TxStatus::kOk);  // queued at the node that will die
  fabric.kill(2);

  EXPECT_FALSE(n0->peer_failed(2)) << "silent death is not reported";
  EXPECT_EQ(n0->send(2, packet_of(9)), TxStatus::kOk) << "lost, not refused";
  EXPECT_EQ(n2->send(0, packet_of(10)), TxStatus::kOk) << "a dead node's packets vanish";
  int from_dead = 0;
  n0->poll(
      [&](const ReceivedPacket& p) {
        EXPECT_EQ(value_of(p), 7u) << "only the packet sent before the death arrives";
        ++from_dead;
      },
      16);
  EXPECT_EQ(from_dead, 1);
  EXPECT_EQ(n2->poll([](const ReceivedPacket&) { ADD_FAILURE() << "dead node received"; }, 16), 0);

  std::byte out[4];
  EXPECT_EQ(n0->read(2, ids[0], 0, out, 4, 42), TxStatus::kOk);
  ReadCompletion c[4];
  EXPECT_EQ(n0->poll_reads(c, 4), 0) << "a read from a silently dead node never completes";
  // Live nodes keep working, and barriers exclude the dead node.
  {
    std::jthread other([&] { n1->barrier(); });
    n0->barrier();
  }
  EXPECT_EQ(n0->send(1, packet_of(11)), TxStatus::kOk);
  EXPECT_EQ(n1->poll([](const ReceivedPacket& p) { EXPECT_EQ(value_of(p), 11u); }, 4), 1);
}

TEST(InprocTransport, ReportedKillFailsSendsAndReads) {
  InprocFabric fabric(3);
  auto n0 = fabric.endpoint(0);
  auto n1 = fabric.endpoint(1);
  auto n2 = fabric.endpoint(2);
  std::vector<std::byte> region(64);
  int id = -1;
  {
    std::jthread t1([&] { n1->register_memory(region.data(), 64); });
    std::jthread t2([&] { n2->register_memory(region.data(), 64); });
    id = n0->register_memory(region.data(), 64);
  }
  EXPECT_FALSE(n0->peer_failed(1));
  fabric.kill(1, FailureVisibility::kReported);
  EXPECT_TRUE(n0->peer_failed(1));
  EXPECT_TRUE(n2->peer_failed(1));
  EXPECT_FALSE(n0->peer_failed(2));
  EXPECT_EQ(n0->send(1, packet_of(1)), TxStatus::kPeerFailed);
  std::byte out[8];
  EXPECT_EQ(n0->read(1, id, 0, out, 8, 1), TxStatus::kPeerFailed);
  EXPECT_EQ(n0->read(2, id, 0, out, 8, 2), TxStatus::kOk);
  ReadCompletion c[2];
  ASSERT_EQ(n0->poll_reads(c, 2), 1);
  EXPECT_EQ(c[0].cookie, 2u);
  EXPECT_TRUE(c[0].ok);
}

TEST(InprocTransport, EndpointsOutliveTheFabricObject) {
  std::unique_ptr<Transport> a, b;
  {
    InprocFabric fabric(2);
    a = fabric.endpoint(0);
    b = fabric.endpoint(1);
  }
  ASSERT_EQ(a->send(1, packet_of(3)), TxStatus::kOk);
  EXPECT_EQ(b->poll([](const ReceivedPacket& p) { EXPECT_EQ(value_of(p), 3u); }, 4), 1);
  EXPECT_EQ(a->kind(), TransportKind::kInproc);
  EXPECT_EQ(b->rank(), 1);
  EXPECT_EQ(b->size(), 2);
}

TEST(InprocTransport, MisuseIsRejectedWithClearErrors) {
  EXPECT_THROW(InprocFabric(0), std::invalid_argument);
  InprocOptions zero;
  zero.mailbox_packets = 0;
  EXPECT_THROW(InprocFabric(2, zero), std::invalid_argument);
  InprocFabric fabric(2);
  EXPECT_THROW(fabric.endpoint(2), std::invalid_argument);
  EXPECT_THROW(fabric.endpoint(-1), std::invalid_argument);
  auto a = fabric.endpoint(0);
  EXPECT_THROW(fabric.endpoint(0), std::logic_error);
  EXPECT_THROW(fabric.kill(5), std::invalid_argument);
  EXPECT_THROW(a->deregister_memory(3), std::invalid_argument);
}

TEST(TransportNames, KindsAndStatusesHaveNames) {
  EXPECT_STREQ(to_string(TransportKind::kInproc), "inproc");
  EXPECT_STREQ(to_string(TransportKind::kMpi), "mpi");
  EXPECT_STREQ(to_string(TransportKind::kVerbs), "verbs");
  EXPECT_EQ(parse_transport_kind("mpi"), TransportKind::kMpi);
  EXPECT_EQ(parse_transport_kind("inproc"), TransportKind::kInproc);
  EXPECT_EQ(parse_transport_kind("verbs"), TransportKind::kVerbs);
  EXPECT_EQ(parse_transport_kind("auto"),
            verbs_device_available() ? TransportKind::kVerbs : TransportKind::kMpi);
  try {
    parse_transport_kind("infiniband");
    ADD_FAILURE() << "unknown transport accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("infiniband"), std::string::npos);
    EXPECT_NE(std::string(e.what()).find("auto, verbs, mpi, inproc"), std::string::npos);
  }
}

TEST(TransportNames, TransportFromEnvironment) {
  ::setenv("NETSPARSE_TRANSPORT", "inproc", 1);
  EXPECT_EQ(transport_from_env(), TransportKind::kInproc);
  ::setenv("NETSPARSE_TRANSPORT", "bogus", 1);
  try {
    transport_from_env();
    ADD_FAILURE() << "bogus NETSPARSE_TRANSPORT accepted";
  } catch (const std::invalid_argument& e) {
    EXPECT_NE(std::string(e.what()).find("NETSPARSE_TRANSPORT"), std::string::npos);
  }
  ::setenv("NETSPARSE_TRANSPORT", "", 1);
  EXPECT_EQ(transport_from_env(),
            verbs_device_available() ? TransportKind::kVerbs : TransportKind::kMpi);
  ::unsetenv("NETSPARSE_TRANSPORT");
}

}  // namespace
}  // namespace netsparse::transport

// Engine internals: destination solver, SPSC ring, and the server/client validation of packets
// forged by a raw transport endpoint (out-of-region idxs, wrong headers, forged responses).
#include <gtest/gtest.h>

#include <atomic>
#include <chrono>
#include <map>
#include <set>
#include <thread>

#include "concat/frame.hpp"
#include "concat/protocol.hpp"
#include "raw_peer.hpp"
#include "rig/config.hpp"
#include "rig/destination.hpp"
#include "rig/engine.hpp"
#include "rig/spsc_ring.hpp"
#include "rig_test_util.hpp"
#include "rig_wr.hpp"
#include "transport/transport.hpp"

namespace rig = netsparse::rig;
namespace cc = netsparse::concat;
namespace tr = netsparse::transport;

TEST(Destination, EqualBlocksAndPowerOfTwo) {
  const std::vector<std::uint64_t> off = {0, 100, 200, 300, 350};
  rig::DestinationSolver s(off);
  EXPECT_TRUE(s.equal_blocks());
  for (std::uint64_t r = 0; r < 350; ++r) {
    EXPECT_EQ(s.owner(r), static_cast<int>(r / 100)) << r;
  }
  EXPECT_EQ(s.owner(350), 3);  // beyond the end: last node (which rejects it)
  EXPECT_EQ(s.owner(UINT64_MAX), 3);
  const std::vector<std::uint64_t> pow2 = {0, 64, 128, 192};
  rig::DestinationSolver t(pow2);
  EXPECT_TRUE(t.equal_blocks());
  for (std::uint64_t r = 0; r < 192; ++r) EXPECT_EQ(t.owner(r), static_cast<int>(r / 64));
}

TEST(Destination, UnevenAndEmptyBlocksUseBinarySearch) {
  const std::vector<std::uint64_t> off = {0, 10, 10, 45, 46, 100};
  rig::DestinationSolver s(off);
  EXPECT_FALSE(s.equal_blocks());
  for (std::uint64_t r = 0; r < 100; ++r) {
    int want = 0;
    while (
        !(off[static_cast<std::size_t>(want)] <= r && r < off[static_cast<std::size_t>(want) + 1]))
      ++want;
    EXPECT_EQ(s.owner(r), want) << r;
  }
  // Equal blocks followed by empty ones (fewer rows than nodes).
  const std::vector<std::uint64_t> few = {0, 1, 2, 3, 3, 3};
  rig::DestinationSolver f(few);
  EXPECT_EQ(f.owner(0), 0);
  EXPECT_EQ(f.owner(2), 2);
  EXPECT_THROW(rig::DestinationSolver(std::vector<std::uint64_t>{0, 5, 3}), std::invalid_argument);
  EXPECT_THROW(rig::DestinationSolver(std::vector<std::uint64_t>{1, 5}), std::invalid_argument);
}

TEST(SpscRing, InOrderAcrossThreadsWithBatchedPublish) {
  rig::SpscRing<std::uint64_t> ring(64);
  constexpr std::uint64_t kN = 200000;
  std::thread producer([&] {
    std::uint64_t next = 0;
    while (next < kN) {
      const std::size_t room = ring.free_space();
      const std::size_t n = std::min<std::uint64_t>({room, kN - next, 5});
      for (std::size_t k = 0; k < n; ++k) ring.write(k, next + k);
      ring.publish(n);
      next += n;
      if (n == 0) std::this_thread::yield();
    }
  });
  std::uint64_t expect = 0;
  while (expect < kN) {
    std::uint64_t v;
    if (ring.pop(v)) {
      ASSERT_EQ(v, expect);
      ++expect;
    } else {
      std::this_thread::yield();
    }
  }
  producer.join();
  EXPECT_TRUE(ring.empty());
}

namespace {

std::vector<std::byte> packet(cc::PrType type, std::uint32_t dest, std::uint32_t prop_len,
                              const std::vector<cc::PrHeader>& prs, std::uint8_t fill = 0) {
  std::vector<std::byte> p(
      cc::packet_bytes(type, prop_len, static_cast<std::uint32_t>(prs.size())));
  std::size_t at = cc::encode_concat_header(
      p.data(), {type, dest, prop_len, static_cast<std::uint32_t>(prs.size())});
  std::vector<std::byte> payload(prop_len, std::byte{fill});
  for (const auto& h : prs) {
    at += cc::encode_pr(p.data() + at, h, type == cc::PrType::kResponse ? payload.data() : nullptr,
                        type == cc::PrType::kResponse ? prop_len : 0);
  }
  return p;
}

}  // namespace

// Node 1 is a real engine owning rows [100, 200); node 0 is a raw endpoint that forges packets.
TEST(Server, ValidatesEveryIdxAndDropsMalformedPackets) {
  constexpr std::uint32_t P = 24;
  rigtest::EngineWithRawPeer c(P);
  ASSERT_NE(c.mr, nullptr);

  auto drive = [&] {
    for (int k = 0; k < 50; ++k) c.engine.progress_inline();
  };
  const std::uint32_t me = 0;
  // Reads: one valid, three outside node 0's rows (below, above, huge), one claiming to come
  // from node 0 itself, one from a unit no engine can have (>= kMaxUnits).
  c.raw->send(1, packet(cc::PrType::kRead, 1, P,
                        {{me, 3, 150, 11},
                         {me, 3, 50, 12},
                         {me, 3, 200, 13},
                         {me, 3, UINT64_MAX, 14},
                         {1, 3, 120, 15},
                         {me, rig::kMaxUnits, 120, 16}}));
  // Malformed packets: wrong destination, wrong property length, truncated, unknown type.
  c.raw->send(1, packet(cc::PrType::kRead, 0, P, {{me, 0, 150, 1}}));
  c.raw->send(1, packet(cc::PrType::kRead, 1, P + 1, {{me, 0, 150, 1}}));
  auto truncated = packet(cc::PrType::kRead, 1, P, {{me, 0, 150, 1}, {me, 0, 151, 2}});
  truncated.pop_back();
  c.raw->send(1, truncated);
  auto unknown = packet(cc::PrType::kRead, 1, P, {{me, 0, 150, 1}});
  unknown[0] = std::byte{9};
  c.raw->send(1, unknown);
  // Forged answers: nothing is pending (stale), and a unit that does not exist (malformed), for
  // both answer types.
  c.raw->send(1, packet(cc::PrType::kResponse, 1, P, {{me, 0, 150, 0}}, 0xAB));
  c.raw->send(1, packet(cc::PrType::kResponse, 1, P, {{me, 999, 150, 0}}, 0xAB));
  c.raw->send(1, packet(cc::PrType::kInvalid, 1, P, {{me, 0, 150, 0}}));
  c.raw->send(1, packet(cc::PrType::kInvalid, 1, P, {{me, 999, 150, 0}}));
  // Forged control PRs: from this very node, and an unknown control message.
  c.raw->send(1, packet(cc::PrType::kControl, 1, P, {{1, 0, 7, rig::kControlQuiesceDone}}));
  c.raw->send(1, packet(cc::PrType::kControl, 1, P, {{me, 0, 7, rig::kControlQuiesceDone + 1}}));
  drive();

  std::map<std::uint32_t, std::pair<cc::PrType, std::vector<std::uint8_t>>>
      answers;  // req_id -> (type, payload)
  // A transport message is a frame of one or more packets (concat/frame.hpp).
  rigtest::poll_packets(
      *c.raw, 100, [&] { drive(); },
      [&](std::span<const std::byte> part) {
        cc::PacketView v;
        ASSERT_EQ(cc::decode_packet(part, 0, P, &v), cc::DecodeError::kOk);
        const cc::PrType type = v.header().type;
        ASSERT_TRUE(type == cc::PrType::kResponse || type == cc::PrType::kInvalid);
        for (std::uint32_t i = 0; i < v.size(); ++i) {
          const auto h = v.pr(i);
          EXPECT_EQ(h.src_node, 1u);
          EXPECT_EQ(h.src_unit, 3);
          const auto* b = reinterpret_cast<const std::uint8_t*>(v.payload(i));
          ASSERT_EQ(b == nullptr, type == cc::PrType::kInvalid) << "only responses carry data";
          answers[h.req_id] = {type, b == nullptr ? std::vector<std::uint8_t>()
                                                  : std::vector<std::uint8_t>(b, b + P)};
        }
      },
      [&] { return answers.size() >= 4; });
  ASSERT_EQ(answers.size(), 4u) << "one answer per well-formed read PR from node 0";
  ASSERT_TRUE(answers.count(11));
  EXPECT_EQ(answers[11].first, cc::PrType::kResponse);
  EXPECT_EQ(rigtest::check_prop(answers[11].second.data(), 150, P), "");
  for (std::uint32_t id : {12u, 13u, 14u}) {
    ASSERT_TRUE(answers.count(id)) << id;
    EXPECT_EQ(answers[id].first, cc::PrType::kInvalid)
        << "idx outside rows [100,200) must be refused";
  }
  const auto s = c.engine.snapshot();
  EXPECT_EQ(s.server.answered, 4u);
  EXPECT_EQ(s.server.invalid, 3u);
  EXPECT_EQ(s.server.malformed_prs, 2u);  // src_node == self, src_unit >= kMaxUnits
  // Four bad packets + the response and the invalid for unit 999 + the two forged control PRs.
  EXPECT_EQ(s.malformed_packets, 4u + 2u + 2u);
  EXPECT_EQ(s.client.stale_responses, 2u);
  EXPECT_EQ(s.control_prs, 0u);
  const int inv = cc::type_index(cc::PrType::kInvalid);
  EXPECT_EQ(s.concat.prs[inv], 3u);
  EXPECT_EQ(s.concat.packets[inv], 3u) << "each refused idx leaves in its own packet";
  EXPECT_EQ(s.concat.payload_bytes[inv], 0u);
  EXPECT_EQ(s.concat.prs[cc::type_index(cc::PrType::kResponse)], 1u);

  // Teardown: node 0 declares itself done (a control PR), then both run the collectives.
  EXPECT_TRUE(rigtest::deregister_with_raw_peer(*c.raw, c.raw_region, P,
                                                [&] { return c.engine.deregister_region(c.mr); }));
}

namespace {
// A poll_packets handler: checks every response's rows and records their req_ids in `answered`.
auto answer_collector(std::uint32_t P, std::set<std::uint32_t>& answered) {
  return [P, &answered](std::span<const std::byte> part) {
    cc::PacketView v;
    ASSERT_EQ(cc::decode_packet(part, 0, P, &v), cc::DecodeError::kOk);
    if (v.header().type != cc::PrType::kResponse) return;
    for (std::uint32_t i = 0; i < v.size(); ++i) {
      EXPECT_EQ(
          rigtest::check_prop(reinterpret_cast<const std::uint8_t*>(v.payload(i)), v.pr(i).idx, P),
          "");
      answered.insert(v.pr(i).req_id);
    }
  };
}
}  // namespace

// INLINE with a standby thread (issue 37 item 3): the application never calls the engine, yet a
// peer's read is answered, by the standby thread (counted as its takeover); without one the
// read waits until the application calls in. TSan runs this: the standby thread steps the engine
// while the test thread takes snapshots and tears the region down.
TEST(Standby, ServesThePeerWhileTheApplicationStaysAway) {
  constexpr std::uint32_t P = 16;
  for (const std::uint32_t standby_us : {200u, 0u}) {
    SCOPED_TRACE("standby_us " + std::to_string(standby_us));
    rigtest::EngineWithRawPeer c(P, standby_us);
    c.raw->send(1, packet(cc::PrType::kRead, 1, P, {{0, 0, 150, 7}, {0, 0, 151, 8}}));
    std::set<std::uint32_t> answered;
    const auto on_packet = answer_collector(P, answered);
    // Up to 2 s without a single call into the engine (0.3 s where nothing can answer).
    rigtest::poll_packets(
        *c.raw, standby_us > 0 ? 2000 : 300,
        [] { std::this_thread::sleep_for(std::chrono::milliseconds(1)); }, on_packet,
        [&] { return answered.size() >= 2; });
    const auto s = c.engine.snapshot();
    if (standby_us > 0) {
      EXPECT_EQ(answered, (std::set<std::uint32_t>{7, 8})) << "served while the application slept";
      EXPECT_GE(s.standby_takeovers, 1u);
      EXPECT_GE(s.standby_steps, 1u);
    } else {
      EXPECT_TRUE(answered.empty()) << "pure INLINE serves only inside library calls";
      EXPECT_EQ(s.standby_takeovers, 0u);
      rigtest::poll_packets(
          *c.raw, 2000, [&] { c.engine.progress_inline(); }, on_packet,
          [&] { return answered.size() >= 2; });
      EXPECT_EQ(answered, (std::set<std::uint32_t>{7, 8})) << "once the application calls in";
    }
    EXPECT_TRUE(rigtest::deregister_with_raw_peer(
        *c.raw, c.raw_region, P, [&] { return c.engine.deregister_region(c.mr); }));
  }
}

// While the application keeps calling in, the standby thread looks less and less often (its
// interval doubles up to 16x standby_us): one wake per standby_us cost a distributed SpMV 7-8 %
// on two busy cores. Over 300 ms of calls at 200 us it wakes about 100 times, against 1500
// without the stretch (1100 measured with it removed, on a loaded machine); the bound, a third
// of the unstretched count, leaves room for the thread's looks restarting at 200 us whenever a
// loaded machine (sanitizers, parallel ctest) keeps this thread from calling for an interval.
TEST(Standby, LooksLessOftenWhileTheApplicationDrives) {
  constexpr std::uint32_t P = 16;
  constexpr std::uint32_t kStandbyUs = 200;
  rigtest::EngineWithRawPeer c(P, kStandbyUs);
  const auto wakes_before = c.engine.snapshot().standby_wakes;
  const auto start = std::chrono::steady_clock::now();
  std::uint64_t calls = 0;
  while (std::chrono::steady_clock::now() - start < std::chrono::milliseconds(300)) {
    c.engine.progress_inline();
    ++calls;
    std::this_thread::sleep_for(std::chrono::microseconds(20));
  }
  const auto elapsed_us = std::chrono::duration_cast<std::chrono::microseconds>(
                              std::chrono::steady_clock::now() - start)
                              .count();
  const auto s = c.engine.snapshot();
  const std::uint64_t wakes = s.standby_wakes - wakes_before;
  const auto unstretched = static_cast<std::uint64_t>(elapsed_us) / kStandbyUs;
  EXPECT_GE(wakes, 1u) << "the thread looks at all";
  EXPECT_LT(wakes * 3, unstretched) << wakes << " wakes in " << elapsed_us << " us, " << calls
                                    << " calls, " << s.standby_takeovers << " takeovers";
  EXPECT_TRUE(rigtest::deregister_with_raw_peer(*c.raw, c.raw_region, P,
                                                [&] { return c.engine.deregister_region(c.mr); }));
}

// Frames on the engine's receive path: a frame carrying a read packet and a control packet is
// served packet by packet; a frame whose last packet is cut is refused as a whole (nothing of it
// is answered) and counted once as malformed.
TEST(Server, FramesAreSplitAndTruncatedFramesRefused) {
  constexpr std::uint32_t P = 16;
  rigtest::EngineWithRawPeer c(P);
  const std::uint32_t me = 0;
  auto join = [](std::vector<std::vector<std::byte>> parts) {
    std::vector<std::byte> f;
    for (auto& p : parts) f.insert(f.end(), p.begin(), p.end());
    return f;
  };
  // Truncated first: cut one byte off a two-packet frame; neither packet may be served.
  auto cut = join({packet(cc::PrType::kRead, 1, P, {{me, 0, 101, 1}}),
                   packet(cc::PrType::kRead, 1, P, {{me, 0, 102, 2}})});
  cut.pop_back();
  c.raw->send(1, cut);
  c.raw->send(1, join({packet(cc::PrType::kRead, 1, P, {{me, 0, 150, 7}, {me, 0, 151, 8}}),
                       packet(cc::PrType::kControl, 1, P, {{me, 0, 1, rig::kControlQuiesceDone}}),
                       packet(cc::PrType::kRead, 1, P, {{me, 0, 152, 9}})}));
  std::set<std::uint32_t> answered;
  rigtest::poll_packets(
      *c.raw, 200, [&] { c.engine.progress_inline(); }, answer_collector(P, answered),
      [&] { return answered.size() >= 3; });
  EXPECT_EQ(answered, (std::set<std::uint32_t>{7, 8, 9}));
  const auto s = c.engine.snapshot();
  EXPECT_EQ(s.malformed_packets, 1u) << "the truncated frame, once";
  EXPECT_EQ(s.server.answered, 3u);
  EXPECT_EQ(s.control_prs, 1u) << "the control packet inside the frame";
  EXPECT_EQ(s.frames_in, 2u);
  // Teardown: node 0's quiesce-done for round 1 already arrived inside the frame.
  std::thread peer_down([&] {
    c.raw->barrier();
    c.raw->deregister_memory(c.raw_region);
  });
  std::thread drain([&] {
    // Keep node 0's side of the transport polled so the engine's own "done" is delivered.
    for (int k = 0; k < 1000; ++k) {
      c.raw->poll([](const tr::ReceivedPacket&) {}, 16);
      std::this_thread::sleep_for(std::chrono::microseconds(100));
    }
  });
  EXPECT_TRUE(c.engine.deregister_region(c.mr));
  peer_down.join();
  drain.join();
}

// AUTO progress: a thread only where a core is free for it beside the compute threads.
TEST(Config, AutoProgressNeedsAFreeCore) {
  using rig::choose_progress;
  EXPECT_EQ(choose_progress(1, 1, true, "").mode, NS_PROGRESS_INLINE);
  EXPECT_EQ(choose_progress(2, 1, true, "").mode, NS_PROGRESS_THREAD);
  EXPECT_EQ(choose_progress(2, 2, true, "").mode, NS_PROGRESS_INLINE);
  EXPECT_EQ(choose_progress(8, 4, true, "").mode, NS_PROGRESS_THREAD);
  // A free core but no MPI_THREAD_MULTIPLE: inline, and the reason says why.
  const auto c = choose_progress(8, 1, false, "x");
  EXPECT_EQ(c.mode, NS_PROGRESS_INLINE);
  EXPECT_NE(c.reason.find("MPI_THREAD_MULTIPLE"), std::string::npos) << c.reason;
  EXPECT_NE(choose_progress(1, 1, true, "2 ranks").reason.find("1 core per rank (2 ranks)"),
            std::string::npos);
}

TEST(Config, CoresPerRankFromTheHostsAffinityMasks) {
  using Mask = std::vector<unsigned char>;
  const Mask c0 = {0x01, 0}, c1 = {0x02, 0}, c01 = {0x03, 0}, c0123 = {0x0F, 0};
  EXPECT_EQ(rig::cores_per_rank({c0, c1}, 0), 1) << "bound, one core each";
  EXPECT_EQ(rig::cores_per_rank({c01, c01}, 1), 1) << "unbound: 2 cores shared by 2 ranks";
  EXPECT_EQ(rig::cores_per_rank({c0, c0}, 0), 1) << "both on core 0 (taskset -c 0)";
  EXPECT_EQ(rig::cores_per_rank({c0123, c0123}, 0), 2);
  EXPECT_EQ(rig::cores_per_rank({c01}, 0), 2);
  EXPECT_EQ(rig::cores_per_rank({Mask{0x0C, 0}, c01}, 1), 2) << "disjoint pairs";
}

namespace {
// A transport that works until told to throw from poll(), like a transport failing mid-run.
class ThrowingTransport final : public tr::Transport {
 public:
  explicit ThrowingTransport(std::unique_ptr<tr::Transport> inner) : inner_(std::move(inner)) {}
  std::atomic<bool> fail{false};
  tr::TransportKind kind() const noexcept override { return inner_->kind(); }
  int rank() const noexcept override { return inner_->rank(); }
  int size() const noexcept override { return inner_->size(); }
  std::size_t max_packet_bytes() const noexcept override { return inner_->max_packet_bytes(); }
  tr::TxStatus send(int d, std::span<const std::byte> p) override { return inner_->send(d, p); }
  int poll(const std::function<void(const tr::ReceivedPacket&)>& h, int max) override {
    if (fail.load()) throw std::runtime_error("simulated transport failure");
    return inner_->poll(h, max);
  }
  int register_memory(void* b, std::size_t n) override { return inner_->register_memory(b, n); }
  void deregister_memory(int r) override { inner_->deregister_memory(r); }
  tr::TxStatus read(int d, int r, std::uint64_t o, void* l, std::size_t b,
                    std::uint64_t c) override {
    return inner_->read(d, r, o, l, b, c);
  }
  int poll_reads(tr::ReadCompletion* out, int max) override { return inner_->poll_reads(out, max); }
  void barrier() override { inner_->barrier(); }
  void allgather(const void* m, std::size_t b, void* a) override { inner_->allgather(m, b, a); }
  bool peer_failed(int p) const noexcept override { return inner_->peer_failed(p); }
  std::uint64_t bytes_sent() const noexcept override { return inner_->bytes_sent(); }

 private:
  std::unique_ptr<tr::Transport> inner_;
};
}  // namespace

// A step that throws on the progress thread fails the work in flight with error completions and
// refuses new work with a clear error; the process goes on (no std::terminate).
TEST(Engine, AFailingStepBecomesErrorCompletionsNotAnAbort) {
  constexpr std::uint32_t P = 8;
  tr::InprocFabric fabric(2);
  auto raw = fabric.endpoint(0);
  auto throwing = std::make_unique<ThrowingTransport>(fabric.endpoint(1));
  ThrowingTransport* t = throwing.get();
  rig::Config cfg;
  cfg.progress_mode = NS_PROGRESS_THREAD;
  ns_context engine(std::move(throwing), cfg);
  const std::vector<std::uint64_t> offsets = {0, 100, 200};
  auto block = rigtest::make_block(100, 200, P);
  std::thread peer([&] { rigtest::join_region_registration(*raw, P, offsets); });
  rig::Region* mr = engine.register_region(block.data(), 100, P, offsets.data());
  peer.join();
  rig::Cq* cq = engine.create_cq(8);
  rig::Qp* qp = engine.create_qp(*cq, 8);
  // Node 0 never answers: the request stays in flight until the failure.
  const std::vector<std::uint64_t> idx = {5, 6, 7};
  std::vector<std::uint8_t> out(idx.size() * P);
  ns_send_wr w = rigtest::rig_wr(77, static_cast<ns_mr*>(mr), idx, out.data());
  ASSERT_EQ(ns_post_send(static_cast<ns_qp*>(qp), &w, nullptr), NS_OK) << ns_last_error();
  std::this_thread::sleep_for(std::chrono::milliseconds(20));
  t->fail = true;
  ns_wc wc{};
  ASSERT_EQ(ns_cq_wait(static_cast<ns_cq*>(cq), 1, &wc, 5000), 1) << "error completion expected";
  EXPECT_EQ(wc.wr_id, 77u);
  EXPECT_EQ(wc.status, NS_WC_TRANSPORT_ERR);
  EXPECT_NE(engine.broken_reason().find("simulated transport failure"), std::string::npos);
  ns_send_wr* bad = nullptr;
  EXPECT_EQ(ns_post_send(static_cast<ns_qp*>(qp), &w, &bad), NS_ERR_TRANSPORT);
  EXPECT_EQ(bad, &w);
  EXPECT_NE(std::string(ns_last_error()).find("simulated transport failure"), std::string::npos)
      << ns_last_error();
  engine.destroy_qp(qp);
  engine.destroy_cq(cq);
}

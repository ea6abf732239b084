// Concatenation + deconcatenation throughput (PRs/s) and header bytes per PR.
#include <benchmark/benchmark.h>

#include <cstring>
#include <random>
#include <vector>

#include "concat/concat_point.hpp"
#include "concat/protocol.hpp"
#include "concat/wire_model.hpp"

namespace {
using namespace netsparse::concat;

// Deconcatenates every packet the way a client unit does: validate, then per PR read the header
// and copy the property to its slot of a (cache-resident) output buffer.
struct DeconcatSink final : PacketSink {
  std::uint32_t prop_len;
  std::vector<std::byte> out;
  std::uint64_t prs = 0;
  std::uint64_t checksum = 0;
  std::uint64_t errors = 0;
  explicit DeconcatSink(std::uint32_t len) : prop_len(len), out(std::size_t{len} * 1024 + 8) {}
  void on_packet(std::uint32_t dest, PrType type, std::span<const std::byte> packet,
                 FlushCause) override {
    PacketView v;
    if (decode_packet(packet, dest, prop_len, &v) != DecodeError::kOk) {
      ++errors;
      return;
    }
    for (std::uint32_t i = 0; i < v.size(); ++i) {
      const PrHeader h = v.pr(i);
      checksum += h.idx ^ h.req_id;
      if (type == PrType::kResponse) {
        std::memcpy(out.data() + (h.idx & 1023) * prop_len, v.payload(i), prop_len);
      }
    }
    prs += v.size();
  }
};

// A destination stream with the temporal locality of Table 4: runs of PRs to one of 16 nodes.
std::vector<std::uint32_t> destination_stream(std::size_t n) {
  std::mt19937 rng(42);
  std::vector<std::uint32_t> dests(n);
  for (std::size_t i = 0; i < n;) {
    const std::uint32_t d = rng() % 16;
    for (std::size_t run = 1 + rng() % 8; run > 0 && i < n; --run) dests[i++] = d;
  }
  return dests;
}

void run_concat(benchmark::State& state, PrType type, bool virtualized) {
  const auto k = static_cast<std::uint32_t>(state.range(0));
  const std::uint32_t prop_len = 4 * k;  // K fp32 values
  ConcatConfig cfg;
  cfg.num_nodes = 16;
  cfg.prop_len = prop_len;
  cfg.delay_ns = 1'000'000;  // long: packets leave because they are full (time stands still)
  cfg.virtualized = virtualized;
  DeconcatSink sink(prop_len);
  ConcatPoint point(cfg, sink);
  const auto dests = destination_stream(1 << 16);
  std::vector<std::byte> props(std::size_t{prop_len} * 64 + 8, std::byte{7});
  std::uint64_t idx = 0;
  for (auto _ : state) {
    for (std::uint32_t d : dests) {
      const std::byte* payload = props.data() + (idx & 63) * prop_len;
      point.push(type, d, {1, 3, idx, static_cast<std::uint32_t>(idx)}, payload, 0);
      ++idx;
    }
  }
  point.flush_all();
  benchmark::DoNotOptimize(sink.checksum);
  if (sink.errors != 0 || sink.prs != idx) state.SkipWithError("lost or corrupt PRs");
  state.SetItemsProcessed(static_cast<std::int64_t>(idx));
  state.counters["PRs/pkt"] = point.stats().prs_per_packet(type_index(type));
  state.counters["B/PR"] = benchmark::Counter(
      static_cast<double>(point.stats().wire_bytes[type_index(type)]) / static_cast<double>(idx));
}

void BM_ConcatDeconcatResponses(benchmark::State& s) {
  run_concat(s, PrType::kResponse, false);
}
void BM_ConcatDeconcatReads(benchmark::State& s) {
  run_concat(s, PrType::kRead, false);
}
void BM_ConcatDeconcatResponsesVirtualized(benchmark::State& s) {
  run_concat(s, PrType::kResponse, true);
}
BENCHMARK(BM_ConcatDeconcatResponses)->ArgName("K")->Arg(1)->Arg(16)->Arg(128);
BENCHMARK(BM_ConcatDeconcatReads)->ArgName("K")->Arg(1)->Arg(16)->Arg(128);
BENCHMARK(BM_ConcatDeconcatResponsesVirtualized)->ArgName("K")->Arg(1)->Arg(16)->Arg(128);

// Header bytes per PR for packets of N response PRs at K = 16, measured from the encoder's real
// output (wire bytes minus property bytes) and checked against the paper's 50 + 14 + 18 N.
void BM_HeaderBytesPerPr(benchmark::State& state) {
  const auto n = static_cast<std::uint32_t>(state.range(0));
  constexpr std::uint32_t kPropLen = 64;
  std::vector<std::byte> packet(packet_bytes(PrType::kResponse, kPropLen, n));
  std::vector<std::byte> payload(kPropLen, std::byte{1});
  std::size_t size = 0;
  for (auto _ : state) {
    size = encode_concat_header(packet.data(), {PrType::kResponse, 1, kPropLen, n});
    for (std::uint32_t i = 0; i < n; ++i) {
      size += encode_pr(packet.data() + size, {0, 0, i, i}, payload.data(), kPropLen);
    }
    benchmark::DoNotOptimize(packet.data());
  }
  const std::size_t header = size + kUpperLayerBytes - std::size_t{n} * kPropLen;
  if (header != 50 + 14 + 18 * std::size_t{n}) state.SkipWithError("header bytes != 64 + 18 N");
  state.counters["hdr_B"] = static_cast<double>(header);
  state.counters["hdr_B/PR"] = static_cast<double>(header) / n;
  state.counters["alone_B/PR"] = static_cast<double>(kPaperLonePrBytes);  // unconcatenated PR
  state.SetItemsProcessed(static_cast<std::int64_t>(state.iterations()) * n);
}
BENCHMARK(BM_HeaderBytesPerPr)->ArgName("N")->DenseRange(1, 4)->Arg(8)->Arg(12)->Arg(18);

}  // namespace

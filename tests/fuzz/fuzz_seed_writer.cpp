// Writes a small corpus of valid decoder inputs (8-byte expectation prefix + packet) for
// fuzz_decoder into the directory given as argv[1]: all four PR types, several sizes, and the
// four plan packet types (concat/plan_wire.hpp) and both scatter packet types
// (concat/scatter_wire.hpp).
#include <cstdio>
#include <string>
#include <utility>
#include <vector>

#include "concat/gather_wire.hpp"
#include "concat/plan_wire.hpp"
#include "concat/protocol.hpp"
#include "concat/scatter_wire.hpp"

using namespace netsparse::concat;

namespace {

void put32(std::vector<std::byte>& out, std::uint32_t v) {
  for (int i = 0; i < 4; ++i) out.push_back(std::byte((v >> (8 * i)) & 0xFF));
}

constexpr std::size_t kPacketAt = 8;  // after the two expectations

// Writes DIR/seed-0, seed-1, ...: each one input of the decoder target, its two 4-byte
// expectations (destination, property or row length) and then one packet.
class SeedWriter {
 public:
  explicit SeedWriter(std::string dir) : dir_(std::move(dir)) {}
  [[nodiscard]] int written() const { return written_; }

  // The expectations and room for a packet of packet_bytes (at kPacketAt, filled with fill).
  static std::vector<std::byte> input(std::uint32_t dest, std::uint32_t len,
                                      std::size_t packet_bytes, std::byte fill = std::byte{0}) {
    std::vector<std::byte> in;
    put32(in, dest);
    put32(in, len);
    in.resize(kPacketAt + packet_bytes, fill);
    return in;
  }

  // False (after perror) when the file cannot be written.
  bool write(const std::vector<std::byte>& in) {
    const std::string path = dir_ + "/seed-" + std::to_string(written_++);
    std::FILE* f = std::fopen(path.c_str(), "wb");
    if (f == nullptr || std::fwrite(in.data(), 1, in.size(), f) != in.size() ||
        std::fclose(f) != 0) {
      std::perror(path.c_str());
      return false;
    }
    return true;
  }

 private:
  std::string dir_;
  int written_ = 0;
};

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: %s CORPUS_DIR\n", argv[0]);
    return 2;
  }
  SeedWriter seeds(argv[1]);
  for (PrType type : {PrType::kRead, PrType::kResponse, PrType::kInvalid, PrType::kControl}) {
    for (std::uint32_t prop_len : {0u, 4u, 8u, 64u}) {
      for (std::uint32_t n : {1u, 2u, 5u}) {
        const std::uint32_t dest = 3 + n;
        std::vector<std::byte> in =
            SeedWriter::input(seeds.written() % 3 == 0 ? kAnyDestination : dest, prop_len,
                              packet_bytes(type, prop_len, n));
        std::size_t off =
            kPacketAt + encode_concat_header(in.data() + kPacketAt, {type, dest, prop_len, n});
        std::vector<std::byte> payload(prop_len);
        for (std::uint32_t i = 0; i < n; ++i) {
          for (std::uint32_t j = 0; j < prop_len; ++j) payload[j] = std::byte(i + j);
          const bool resp = carries_payload(type);
          off += encode_pr(in.data() + off, {i, static_cast<std::uint16_t>(i * 3), 1000ull * i, i},
                           resp ? payload.data() : nullptr, resp ? prop_len : 0);
        }
        if (!seeds.write(in)) return 1;
      }
    }
  }
  // Plan packets: lists of 4- and 8-byte rows, starts, rows of 4..64 bytes, refusals.
  struct PlanSeed {
    PlanType type;
    std::uint32_t rec_len, n;
  };
  for (const PlanSeed ps : {PlanSeed{PlanType::kInstall, 4, 3}, PlanSeed{PlanType::kInstall, 8, 2},
                            PlanSeed{PlanType::kStart, 0, 0}, PlanSeed{PlanType::kRows, 4, 3},
                            PlanSeed{PlanType::kRows, 64, 2}, PlanSeed{PlanType::kRefuse, 0, 0}}) {
    std::vector<std::byte> in =
        SeedWriter::input(1, ps.type == PlanType::kRows ? ps.rec_len : 16,
                          kPlanHeaderBytes + std::size_t{ps.n} * ps.rec_len, std::byte{7});
    encode_plan_header(in.data() + kPacketAt, {{ps.type, 1, ps.rec_len, ps.n, 0}, 5, 2, 9, 0});
    if (!seeds.write(in)) return 1;
  }
  // Compact gather packets: reads of 4- and 8-byte rows, rows of 4..64 bytes, a refusal.
  struct GatherSeed {
    GatherType type;
    std::uint32_t rec_len, n, first, total;
  };
  for (const GatherSeed gs : {GatherSeed{GatherType::kGatherRead, 4, 3, 0, 3},
                              GatherSeed{GatherType::kGatherRead, 8, 2, 0, 2},
                              GatherSeed{GatherType::kGatherRows, 4, 3, 2, 5},
                              GatherSeed{GatherType::kGatherRows, 64, 2, 0, 2},
                              GatherSeed{GatherType::kGatherRefuse, 0, 0, 1, 4}}) {
    std::vector<std::byte> in =
        SeedWriter::input(1, gs.type == GatherType::kGatherRows ? gs.rec_len : 16,
                          kGatherHeaderBytes + std::size_t{gs.n} * gs.rec_len, std::byte{7});
    encode_gather_header(in.data() + kPacketAt,
                         {{gs.type, 1, gs.rec_len, gs.n, 0}, 5, 2, gs.first, gs.total});
    if (!seeds.write(in)) return 1;
  }
  // Scatter packets: updates of 4..64-byte rows, acknowledgements of every status.
  struct ScatterSeed {
    ScatterType type;
    std::uint32_t row_bytes, n;
    ScatterStatus status;
  };
  for (const ScatterSeed ss : {ScatterSeed{ScatterType::kUpdate, 4, 3, ScatterStatus::kApplied},
                               ScatterSeed{ScatterType::kUpdate, 64, 2, ScatterStatus::kApplied},
                               ScatterSeed{ScatterType::kAck, 16, 0, ScatterStatus::kApplied},
                               ScatterSeed{ScatterType::kAck, 16, 0, ScatterStatus::kOutOfRange}}) {
    const std::uint32_t rec = ss.n == 0 ? 0 : 8 + ss.row_bytes;
    std::vector<std::byte> in = SeedWriter::input(
        1, ss.row_bytes, kScatterHeaderBytes + std::size_t{ss.n} * rec, std::byte{3});
    encode_scatter_header(in.data() + kPacketAt, {{ss.type, 1, rec, ss.n, 0}, 77, 0, 1, ss.status});
    if (!seeds.write(in)) return 1;
  }
  std::printf("wrote %d seeds to %s\n", seeds.written(), argv[1]);
  return 0;
}

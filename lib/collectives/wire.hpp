// The collectives' packets (docs/collectives.md, "Wire format"): one 32-byte header, then a
// payload. Little-endian, fixed layout, so encoding and decoding are loads and stores (the same
// choice as lib/concat/protocol.hpp). Every decoder is strict: it checks the whole packet against
// what the receiver expects before anything is used, never reads outside the given bytes, and
// says why it refused.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <string>

namespace netsparse::collectives::wire {

inline constexpr std::size_t kHeaderBytes = 32;

enum class Kind : std::uint8_t {
  kDescriptor = 1,          // this rank's arguments of operation `seq` (agreement)
  kContribution = 2,        // dense: a rank's values of one block, to the block's aggregator
  kResult = 3,              // dense: the reduced block, from its aggregator to every rank
  kSparseContribution = 4,  // sparse: a rank's entries of one block
  kSparseResult = 5,        // sparse: the reduced block
};

// Header flags (sparse kinds only; dense packets carry 0).
enum : std::uint8_t {
  kFlagLast = 1u << 0,   // last packet of its block (packet_count says how many it had)
  kFlagDense = 1u << 1,  // values only, for block offsets [first, first + count)
};

struct Header {
  Kind kind;
  std::uint8_t flags;
  std::uint32_t seq;           // operation number on this communicator
  std::uint32_t block;         // block id
  std::uint32_t count;         // elements (dense) or entries (sparse) in the payload
  std::uint32_t packet_index;  // sparse: position of this packet in its block
  std::uint32_t packet_count;  // sparse: packets of the block, on the last one; else 0
  std::uint32_t first;         // sparse dense-encoded: block offset of the first value
};

void encode_header(const Header& h, std::byte* out) noexcept;  // writes kHeaderBytes

enum class DecodeError {
  kOk,
  kTruncated,     // shorter than a header, or payload size not what the header says
  kUnknownKind,   // kind byte not a Kind, or a flag / reserved field set that must be 0
  kBadBlock,      // block id outside the operation's blocks
  kBadCount,      // count not what this block holds, or beyond the block
  kBadPacketSeq,  // packet_index / packet_count inconsistent
  kBadOffset,     // a sparse entry's offset is outside its block
};
const char* to_string(DecodeError e) noexcept;

// Header only (kind known, reserved bytes zero); the payload is checked by the kind's decoder.
DecodeError decode_header(std::span<const std::byte> packet, Header* out) noexcept;

// ---- descriptor (agreement) ----------------------------------------------------------------
// The operation a descriptor announces (ranks calling different ones are refused).
enum class Collective : std::uint8_t {
  kDense = 1,  // allreduce
  kSparse = 2,
  kReduce = 3,  // to a root
  kBcast = 4,
  kBarrier = 5,
  kAllgather = 6,
  kReduceScatter = 7,
};
inline constexpr std::uint8_t kCollectiveMax = 7;
struct Descriptor {
  Collective collective = Collective::kDense;
  std::uint8_t dtype = 0;
  std::uint8_t op = 0;
  std::uint8_t flags = 0;  // bit 0: reproducible
  std::uint32_t user_op_id = 0;
  std::uint32_t packet_bytes = 0;
  std::int32_t local_error = 0;  // 0, or the rank's LocalError (collectives/communicator.hpp)
  std::uint64_t count = 0;       // dense: elements; sparse: the dense length n
  std::uint64_t nnz = 0;         // sparse: this rank's entries (not agreed)
  std::uint64_t root = 0;        // reduce, bcast: the root (agreed); travels where nnz does
  bool operator==(const Descriptor&) const = default;
};
inline constexpr std::size_t kDescriptorBytes = 32;
void encode_descriptor(const Descriptor& d, std::byte* out) noexcept;  // kDescriptorBytes
DecodeError decode_descriptor(std::span<const std::byte> payload, Descriptor* out) noexcept;

// ---- sparse blocks -------------------------------------------------------------------------
// The index space [0, n) in blocks of `span` indices (the last one shorter).
struct SparseLayout {
  std::uint64_t n = 0;
  std::uint32_t span = 1;
  std::uint32_t blocks = 0;
  std::size_t value_bytes = 4;
  std::uint32_t block_len(std::uint32_t b) const noexcept {
    const std::uint64_t start = std::uint64_t{b} * span;
    return static_cast<std::uint32_t>(n - start < span ? n - start : span);
  }
};
// Bounds of one sparse packet: entries are (u32 offset, value) pairs stored as an offset array
// then a value array; dense-encoded packets hold values only.
inline constexpr std::uint32_t kMaxPacketsPerBlock = 1u << 24;
std::size_t sparse_entry_bytes(std::size_t value_bytes) noexcept;

// A decoded sparse packet: pointers into the packet (valid while it is); values unaligned.
struct SparseView {
  Header header{};
  const std::byte* offsets = nullptr;  // count little-endian u32 (sparse encoding), else null
  const std::byte* values = nullptr;   // count values
  bool dense() const noexcept { return (header.flags & kFlagDense) != 0; }
  std::uint32_t offset(std::uint32_t i) const noexcept;  // sparse encoding, i < count
  // All count offsets into out (one copy where the machine is little-endian, not a call each:
  // the per-entry call was a visible share of a sparse allreduce's receive).
  void copy_offsets(std::uint32_t* out) const noexcept;
};
// Checks kind (one of the sparse kinds), block < layout.blocks, flags, packet numbering, exact
// payload size, and every offset (sparse) or the range [first, first + count) (dense) against
// the block's length.
DecodeError decode_sparse(std::span<const std::byte> packet, const SparseLayout& layout,
                          SparseView* out) noexcept;
// Encoders used by the senders (and the fuzz target's round trip). `out` must hold
// kHeaderBytes + count * sparse_entry_bytes (sparse) or count * value_bytes (dense) bytes.
std::size_t encode_sparse(const Header& h, const std::uint32_t* offsets, const std::byte* values,
                          std::size_t value_bytes, std::byte* out) noexcept;
std::size_t encode_sparse_dense(const Header& h, const std::byte* values, std::size_t value_bytes,
                                std::byte* out) noexcept;

}  // namespace netsparse::collectives::wire

#include "collectives/wire.hpp"

#include <array>
#include <bit>
#include <cstring>

#include "support/enum_names.hpp"

namespace netsparse::collectives::wire {
namespace {

void put32(std::byte* p, std::uint32_t v) noexcept {
  std::memcpy(p, &v, 4);
}
void put64(std::byte* p, std::uint64_t v) noexcept {
  std::memcpy(p, &v, 8);
}
std::uint32_t get32(const std::byte* p) noexcept {
  std::uint32_t v;
  std::memcpy(&v, p, 4);
  return v;
}
std::uint64_t get64(const std::byte* p) noexcept {
  std::uint64_t v;
  std::memcpy(&v, p, 8);
  return v;
}

// Header layout: kind u8 | flags u8 | reserved u16 | seq | block | count | packet_index |
// packet_count | first | reserved u32.
constexpr std::size_t kKind = 0, kFlags = 1, kReserved16 = 2, kSeq = 4, kBlock = 8, kCount = 12,
                      kIndex = 16, kPackets = 20, kFirst = 24, kReserved32 = 28;

}  // namespace

static_assert(sizeof(float) == 4 && sizeof(double) == 8);

constexpr auto kDecodeErrorNames = std::to_array<support::EnumName<DecodeError>>({
    {DecodeError::kOk, "ok"},
    {DecodeError::kTruncated, "truncated or oversized payload"},
    {DecodeError::kUnknownKind, "unknown kind or reserved field set"},
    {DecodeError::kBadBlock, "block id out of range"},
    {DecodeError::kBadCount, "element count does not fit the block"},
    {DecodeError::kBadPacketSeq, "inconsistent packet numbering"},
    {DecodeError::kBadOffset, "entry offset outside its block"},
});

const char* to_string(DecodeError e) noexcept {
  return support::name_of<kDecodeErrorNames>(e, "unknown decode error");
}

void encode_header(const Header& h, std::byte* out) noexcept {
  out[kKind] = static_cast<std::byte>(h.kind);
  out[kFlags] = static_cast<std::byte>(h.flags);
  out[kReserved16] = out[kReserved16 + 1] = std::byte{0};
  put32(out + kSeq, h.seq);
  put32(out + kBlock, h.block);
  put32(out + kCount, h.count);
  put32(out + kIndex, h.packet_index);
  put32(out + kPackets, h.packet_count);
  put32(out + kFirst, h.first);
  put32(out + kReserved32, 0);
}

DecodeError decode_header(std::span<const std::byte> packet, Header* out) noexcept {
  if (packet.size() < kHeaderBytes) return DecodeError::kTruncated;
  const std::byte* p = packet.data();
  const auto kind = static_cast<std::uint8_t>(p[kKind]);
  if (kind < 1 || kind > 5) return DecodeError::kUnknownKind;
  if (p[kReserved16] != std::byte{0} || p[kReserved16 + 1] != std::byte{0} ||
      get32(p + kReserved32) != 0)
    return DecodeError::kUnknownKind;
  Header h;
  h.kind = static_cast<Kind>(kind);
  h.flags = static_cast<std::uint8_t>(p[kFlags]);
  h.seq = get32(p + kSeq);
  h.block = get32(p + kBlock);
  h.count = get32(p + kCount);
  h.packet_index = get32(p + kIndex);
  h.packet_count = get32(p + kPackets);
  h.first = get32(p + kFirst);
  const bool sparse = h.kind == Kind::kSparseContribution || h.kind == Kind::kSparseResult;
  if (!sparse && (h.flags != 0 || h.packet_index != 0 || h.packet_count != 0 || h.first != 0))
    return DecodeError::kUnknownKind;
  if (sparse && (h.flags & ~(kFlagLast | kFlagDense)) != 0) return DecodeError::kUnknownKind;
  *out = h;
  return DecodeError::kOk;
}

// Descriptor layout: collective u8 | dtype u8 | op u8 | flags u8 | user_op_id | packet_bytes |
// local_error | count u64 | nnz u64 (sparse) or root u64 (every other collective).
void encode_descriptor(const Descriptor& d, std::byte* out) noexcept {
  out[0] = static_cast<std::byte>(d.collective);
  out[1] = static_cast<std::byte>(d.dtype);
  out[2] = static_cast<std::byte>(d.op);
  out[3] = static_cast<std::byte>(d.flags);
  put32(out + 4, d.user_op_id);
  put32(out + 8, d.packet_bytes);
  put32(out + 12, static_cast<std::uint32_t>(d.local_error));
  put64(out + 16, d.count);
  put64(out + 24, d.collective == Collective::kSparse ? d.nnz : d.root);
}

DecodeError decode_descriptor(std::span<const std::byte> payload, Descriptor* out) noexcept {
  if (payload.size() != kDescriptorBytes) return DecodeError::kTruncated;
  const std::byte* p = payload.data();
  const auto collective = static_cast<std::uint8_t>(p[0]);
  if (collective < 1 || collective > kCollectiveMax) return DecodeError::kUnknownKind;
  Descriptor d;
  d.collective = static_cast<Collective>(collective);
  d.dtype = static_cast<std::uint8_t>(p[1]);
  d.op = static_cast<std::uint8_t>(p[2]);
  d.flags = static_cast<std::uint8_t>(p[3]);
  d.user_op_id = get32(p + 4);
  d.packet_bytes = get32(p + 8);
  d.local_error = static_cast<std::int32_t>(get32(p + 12));
  d.count = get64(p + 16);
  (d.collective == Collective::kSparse ? d.nnz : d.root) = get64(p + 24);
  *out = d;
  return DecodeError::kOk;
}

std::size_t sparse_entry_bytes(std::size_t value_bytes) noexcept {
  return 4 + value_bytes;
}

std::uint32_t SparseView::offset(std::uint32_t i) const noexcept {
  return get32(offsets + 4 * i);
}

void SparseView::copy_offsets(std::uint32_t* out) const noexcept {
  if constexpr (std::endian::native == std::endian::little) {
    if (header.count > 0) std::memcpy(out, offsets, std::size_t{header.count} * 4);
  } else {
    for (std::uint32_t i = 0; i < header.count; ++i) out[i] = get32(offsets + 4 * i);
  }
}

DecodeError decode_sparse(std::span<const std::byte> packet, const SparseLayout& layout,
                          SparseView* out) noexcept {
  Header h;
  if (const DecodeError e = decode_header(packet, &h); e != DecodeError::kOk) return e;
  if (h.kind != Kind::kSparseContribution && h.kind != Kind::kSparseResult)
    return DecodeError::kUnknownKind;
  if (h.block >= layout.blocks) return DecodeError::kBadBlock;
  const bool last = (h.flags & kFlagLast) != 0;
  if (h.packet_index >= kMaxPacketsPerBlock) return DecodeError::kBadPacketSeq;
  if (last ? h.packet_count != h.packet_index + 1 : h.packet_count != 0)
    return DecodeError::kBadPacketSeq;
  const std::uint32_t len = layout.block_len(h.block);
  const std::size_t payload = packet.size() - kHeaderBytes;
  const std::byte* body = packet.data() + kHeaderBytes;
  SparseView v;
  v.header = h;
  if ((h.flags & kFlagDense) != 0) {
    if (h.first > len || h.count > len - h.first) return DecodeError::kBadCount;
    if (payload != std::size_t{h.count} * layout.value_bytes) return DecodeError::kTruncated;
    v.values = body;
  } else {
    if (h.first != 0) return DecodeError::kUnknownKind;
    // No bound on count beyond the payload's size: spilled entries may repeat an offset.
    if (payload != std::size_t{h.count} * sparse_entry_bytes(layout.value_bytes))
      return DecodeError::kTruncated;
    v.offsets = body;
    v.values = body + std::size_t{h.count} * 4;
    for (std::uint32_t i = 0; i < h.count; ++i)
      if (get32(body + 4 * std::size_t{i}) >= len) return DecodeError::kBadOffset;
  }
  *out = v;
  return DecodeError::kOk;
}

std::size_t encode_sparse(const Header& h, const std::uint32_t* offsets, const std::byte* values,
                          std::size_t value_bytes, std::byte* out) noexcept {
  encode_header(h, out);
  std::byte* body = out + kHeaderBytes;
  if (h.count != 0) {
    std::memcpy(body, offsets, std::size_t{h.count} * 4);
    std::memcpy(body + std::size_t{h.count} * 4, values, std::size_t{h.count} * value_bytes);
  }
  return kHeaderBytes + std::size_t{h.count} * sparse_entry_bytes(value_bytes);
}

std::size_t encode_sparse_dense(const Header& h, const std::byte* values, std::size_t value_bytes,
                                std::byte* out) noexcept {
  encode_header(h, out);
  if (h.count != 0) std::memcpy(out + kHeaderBytes, values, std::size_t{h.count} * value_bytes);
  return kHeaderBytes + std::size_t{h.count} * value_bytes;
}

}  // namespace netsparse::collectives::wire

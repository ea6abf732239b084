// libFuzzer target for the sparse-allreduce packet decoder (lib/collectives/wire.hpp). Input
// layout: 1 byte value size selector (1, 2, 4 or 8 bytes), 8 bytes n, 4 bytes span (both
// little-endian), then the packet. Checks, under ASan/UBSan:
//  * decode_sparse never reads outside the packet (it is copied into an exactly sized heap
//    buffer, so one byte past it is a heap-buffer-overflow);
//  * whatever decodes stays inside its block (every offset, or [first, first + count)), has
//    consistent packet numbering, and re-encodes through the senders' encoders to the very same
//    bytes;
//  * whatever fails reports one of the documented errors;
//  * the same bytes as a descriptor (the agreement's payload, every collective kind): it
//    decodes only with a known collective and exactly 32 bytes, and re-encodes to them.
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <vector>

#include "collectives/wire.hpp"

using namespace netsparse::collectives::wire;

namespace {
[[noreturn]] void fail(const char* what) {
  std::fprintf(stderr, "fuzz_sparse_packet: %s\n", what);
  std::abort();
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  if (size < 13) return 0;
  const std::size_t value_bytes = std::size_t{1} << (data[0] & 3);
  std::uint64_t n;
  std::uint32_t span;
  std::memcpy(&n, data + 1, 8);
  std::memcpy(&span, data + 9, 4);
  n &= (std::uint64_t{1} << 40) - 1;
  if (span == 0) span = 1;
  const std::uint64_t blocks = (n + span - 1) / span;
  if (blocks > 0xffffffffull) return 0;
  SparseLayout layout;
  layout.n = n;
  layout.span = span;
  layout.blocks = static_cast<std::uint32_t>(blocks);
  layout.value_bytes = value_bytes;

  const std::size_t len = size - 13;
  std::unique_ptr<std::byte[]> packet(new std::byte[len]);
  if (len != 0) std::memcpy(packet.get(), data + 13, len);
  {
    Descriptor d;
    const DecodeError de = decode_descriptor(std::span<const std::byte>(packet.get(), len), &d);
    if (de == DecodeError::kOk) {
      if (len != kDescriptorBytes) fail("descriptor of the wrong size accepted");
      if (static_cast<std::uint8_t>(d.collective) < 1 ||
          static_cast<std::uint8_t>(d.collective) > kCollectiveMax)
        fail("unknown collective accepted");
      std::byte again[kDescriptorBytes];
      encode_descriptor(d, again);
      if (std::memcmp(again, packet.get(), kDescriptorBytes) != 0)
        fail("descriptor re-encodes differently");
    } else if (de != DecodeError::kTruncated && de != DecodeError::kUnknownKind) {
      fail("undocumented descriptor error");
    }
  }
  SparseView v;
  const DecodeError err = decode_sparse(std::span<const std::byte>(packet.get(), len), layout, &v);
  if (to_string(err) == nullptr) fail("error without text");
  if (err != DecodeError::kOk) {
    switch (err) {
      case DecodeError::kTruncated:
      case DecodeError::kUnknownKind:
      case DecodeError::kBadBlock:
      case DecodeError::kBadCount:
      case DecodeError::kBadPacketSeq:
      case DecodeError::kBadOffset:
        return 0;
      default:
        fail("undocumented error");
    }
  }
  const Header& h = v.header;
  if (h.kind != Kind::kSparseContribution && h.kind != Kind::kSparseResult) fail("foreign kind");
  if (h.block >= layout.blocks) fail("block out of range accepted");
  const std::uint32_t block_len = layout.block_len(h.block);
  const bool last = (h.flags & kFlagLast) != 0;
  if (last && h.packet_count != h.packet_index + 1) fail("last packet with a wrong count");
  if (!last && h.packet_count != 0) fail("count on a packet that is not the last");
  std::vector<std::byte> again(len);
  std::size_t wrote;
  if (v.dense()) {
    if (std::uint64_t{h.first} + h.count > block_len) fail("dense range outside its block");
    if (v.offsets != nullptr) fail("dense packet with offsets");
    wrote = encode_sparse_dense(h, v.values, value_bytes, again.data());
  } else {
    std::vector<std::uint32_t> offs(h.count);
    for (std::uint32_t i = 0; i < h.count; ++i) {
      offs[i] = v.offset(i);
      if (offs[i] >= block_len) fail("offset outside its block accepted");
    }
    wrote = encode_sparse(h, offs.data(), v.values, value_bytes, again.data());
  }
  if (wrote != len || std::memcmp(again.data(), packet.get(), len) != 0)
    fail("re-encoding differs from the accepted packet");
  return 0;
}

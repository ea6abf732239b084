// The bytes a text reader parses (internal to the sparse component): a file's own bytes,
// memory-mapped, or, when its content starts with the gzip magic bytes 1f 8b (whatever the
// file is called), the decompressed content, held in memory. Readers parse both the same way.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "sparse/mapped_file.hpp"

namespace netsparse::sparse_detail {

// The most memory this process can expect to get: physical memory, lowered by RLIMIT_AS and
// RLIMIT_DATA when they are set. Requests derived from untrusted numbers are refused above it
// before they reach the allocator (sanitizers abort on huge requests; Linux overcommits).
std::uint64_t memory_budget_bytes();

// True if the bytes start with the gzip magic 1f 8b.
bool is_gzip(std::string_view bytes) noexcept;

// A malloc'd buffer (realloc lets a growing buffer move without copying, via mremap).
struct FreeDeleter {
  void operator()(char* p) const noexcept;
};
using MallocBuffer = std::unique_ptr<char, FreeDeleter>;

struct Inflated {
  MallocBuffer data;
  std::size_t size = 0;
};

// Decompresses gzip data (one or more concatenated members, as gzip writes them) into memory.
// Throws ParseError(name, 0, reason) if the data is corrupt or truncated, is followed by
// anything but another gzip member, or decompresses to more than `limit` bytes.
Inflated gunzip(std::string_view compressed, const std::string& name, std::uint64_t limit);

// The first (up to) max_bytes of the content of a file: its bytes, or its decompressed bytes
// if it is gzip data (only as much is inflated as the prefix needs). Throws ParseError if the
// file cannot be read or its first compressed bytes are corrupt.
std::string content_prefix(const std::string& path, std::size_t max_bytes);

// A byte count for messages: "512 bytes", "1.5 MiB", ... (binary units up to EiB).
std::string human_bytes(double bytes);

class InputBytes {
 public:
  // Maps the file; inflates it if it is gzip data. Throws ParseError(path, 0, reason).
  explicit InputBytes(const std::string& path);
  // Bytes in memory, used in place unless they are gzip data (then inflated): they must outlive
  // the object. `name` stands for the file in error messages.
  InputBytes(std::string_view bytes, const std::string& name);
  InputBytes(const InputBytes&) = delete;
  InputBytes& operator=(const InputBytes&) = delete;

  // The content: what the parsers read.
  [[nodiscard]] std::string_view bytes() const noexcept { return bytes_; }
  [[nodiscard]] bool compressed() const noexcept { return inflated_.data != nullptr; }

 private:
  void inflate_if_gzip(std::string_view raw, const std::string& name);

  std::optional<MappedFile> file_;
  Inflated inflated_;
  std::string_view bytes_;
};

}  // namespace netsparse::sparse_detail

#include "sparse/input_bytes.hpp"

#include <sys/resource.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <climits>
#include <cstdio>
#include <cstdlib>
#include <limits>

#include "netsparse/sparse_error.hpp"

namespace netsparse::sparse_detail {

namespace {

// inflateInit2's windowBits: 15 (the largest window) + 16 (gzip wrapper only, no zlib/raw).
constexpr int kGzipWindowBits = 15 + 16;

// Ends the inflate stream on every path out.
class InflateStream {
 public:
  explicit InflateStream(const std::string& name) {
    if (inflateInit2(&zs_, kGzipWindowBits) != Z_OK) {
      throw ParseError(name, 0, "cannot start gzip decompression (zlib out of memory)");
    }
  }
  ~InflateStream() { inflateEnd(&zs_); }
  InflateStream(const InflateStream&) = delete;
  InflateStream& operator=(const InflateStream&) = delete;
  z_stream* get() noexcept { return &zs_; }

 private:
  z_stream zs_{};
};

// Feeds [data, data + size) to the stream in pieces zlib's 32-bit counters can take.
class InputFeeder {
 public:
  explicit InputFeeder(std::string_view data) : data_(data) {}
  // Refills next_in / avail_in when zlib has consumed everything given so far.
  void refill(z_stream* zs) noexcept {
    if (zs->avail_in != 0 || given_ == data_.size()) return;
    const std::size_t piece = std::min<std::size_t>(data_.size() - given_, UINT_MAX);
    zs->next_in = reinterpret_cast<Bytef*>(const_cast<char*>(data_.data() + given_));
    zs->avail_in = static_cast<uInt>(piece);
    given_ += piece;
  }
  // Bytes zlib has not consumed yet.
  [[nodiscard]] std::size_t left(const z_stream* zs) const noexcept {
    return data_.size() - given_ + zs->avail_in;
  }

 private:
  std::string_view data_;
  std::size_t given_ = 0;
};

std::string zlib_reason(const z_stream* zs) {
  return zs->msg != nullptr ? std::string(" (") + zs->msg + ")" : std::string();
}

}  // namespace

std::string human_bytes(double bytes) {
  const char* units[] = {"bytes", "KiB", "MiB", "GiB", "TiB", "PiB", "EiB"};
  int u = 0;
  while (bytes >= 1024.0 && u < 6) {
    bytes /= 1024.0;
    ++u;
  }
  char buffer[48];
  std::snprintf(buffer, sizeof buffer, u == 0 ? "%.0f %s" : "%.1f %s", bytes, units[u]);
  return buffer;
}

void FreeDeleter::operator()(char* p) const noexcept {
  std::free(p);
}

std::uint64_t memory_budget_bytes() {
  std::uint64_t budget = std::numeric_limits<std::uint64_t>::max();
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_bytes = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page_bytes > 0) {
    budget = static_cast<std::uint64_t>(pages) * static_cast<std::uint64_t>(page_bytes);
  }
  for (const int resource : {RLIMIT_AS, RLIMIT_DATA}) {
    struct rlimit limit {};
    if (getrlimit(resource, &limit) == 0 && limit.rlim_cur != RLIM_INFINITY) {
      budget = std::min<std::uint64_t>(budget, limit.rlim_cur);
    }
  }
  return budget;
}

bool is_gzip(std::string_view bytes) noexcept {
  return bytes.size() >= 2 && static_cast<unsigned char>(bytes[0]) == 0x1f &&
         static_cast<unsigned char>(bytes[1]) == 0x8b;
}

Inflated gunzip(std::string_view compressed, const std::string& name, std::uint64_t limit) {
  const auto too_large = [&] {
    return ParseError(name, 0,
                      "gzip data decompresses to more than " +
                          human_bytes(static_cast<double>(limit)) +
                          ", the memory this process can get (physical memory or its resource "
                          "limit); decompress the file and read it uncompressed (it is then "
                          "memory-mapped, not held in memory)");
  };
  limit = std::min<std::uint64_t>(limit, std::numeric_limits<std::size_t>::max());
  // Text compresses 3-10x; start at 4x and double (realloc moves large blocks by remapping).
  std::size_t capacity =
      std::clamp<std::uint64_t>(std::uint64_t{4} * compressed.size(), std::uint64_t{1} << 16,
                                std::max<std::uint64_t>(limit, 1));
  Inflated out;
  out.data.reset(static_cast<char*>(std::malloc(capacity)));
  if (!out.data) throw too_large();

  InflateStream stream(name);
  z_stream* zs = stream.get();
  InputFeeder input(compressed);
  for (;;) {
    // At the limit, inflate into a one-byte spill: the stream may still end there (its
    // trailer needs no output), and any byte that lands in the spill is one too many.
    bool at_limit = false;
    if (out.size == capacity) {
      if (capacity >= limit) {
        at_limit = true;
      } else {
        const std::size_t grown =
            static_cast<std::size_t>(std::min<std::uint64_t>(limit, std::uint64_t{2} * capacity));
        char* p = static_cast<char*>(std::realloc(out.data.get(), grown));
        if (p == nullptr) throw too_large();
        out.data.release();
        out.data.reset(p);
        capacity = grown;
      }
    }
    input.refill(zs);
    char spill = 0;
    zs->next_out = reinterpret_cast<Bytef*>(at_limit ? &spill : out.data.get() + out.size);
    zs->avail_out =
        at_limit ? 1 : static_cast<uInt>(std::min<std::size_t>(capacity - out.size, UINT_MAX));
    const uInt avail_before = zs->avail_out;
    const int rc = inflate(zs, Z_NO_FLUSH);
    if (at_limit && zs->avail_out != avail_before) throw too_large();
    if (!at_limit) out.size += avail_before - zs->avail_out;
    if (rc == Z_STREAM_END) {
      const std::size_t left = input.left(zs);
      if (left == 0) break;
      // gzip writes concatenated members for appended files; anything else is an error.
      const std::string_view rest = compressed.substr(compressed.size() - left);
      if (!is_gzip(rest)) {
        throw ParseError(
            name, 0,
            std::to_string(left) + " bytes of trailing data after the gzip stream (corrupt file?)");
      }
      inflateReset(zs);
      continue;
    }
    if (rc == Z_OK) continue;
    if (rc == Z_BUF_ERROR && zs->avail_out == 0) continue;  // output full: grow and go on
    if (rc == Z_BUF_ERROR && input.left(zs) == 0) {
      throw ParseError(name, 0,
                       "truncated gzip file: the compressed data ends before the end of the "
                       "stream (after " +
                           std::to_string(out.size) + " decompressed bytes)");
    }
    if (rc == Z_MEM_ERROR) throw ParseError(name, 0, "gzip decompression ran out of memory");
    throw ParseError(name, 0,
                     "corrupt gzip data after " + std::to_string(out.size) + " decompressed bytes" +
                         zlib_reason(zs));
  }
  // Give back the unused tail (at least one byte stays allocated: realloc(p, 0) frees).
  if (capacity > out.size + 4096) {
    char* p = static_cast<char*>(std::realloc(out.data.get(), std::max<std::size_t>(out.size, 1)));
    if (p != nullptr) {
      out.data.release();
      out.data.reset(p);
    }
  }
  return out;
}

std::string content_prefix(const std::string& path, std::size_t max_bytes) {
  const MappedFile file(path);
  const std::string_view raw = file.bytes();
  if (!is_gzip(raw)) return std::string(raw.substr(0, max_bytes));
  std::string out(max_bytes, '\0');
  InflateStream stream(path);
  z_stream* zs = stream.get();
  InputFeeder input(raw);
  zs->next_out = reinterpret_cast<Bytef*>(out.data());
  zs->avail_out = static_cast<uInt>(std::min<std::size_t>(max_bytes, UINT_MAX));
  while (zs->avail_out > 0) {
    input.refill(zs);
    const int rc = inflate(zs, Z_NO_FLUSH);
    if (rc == Z_STREAM_END && is_gzip(raw.substr(raw.size() - input.left(zs)))) {
      inflateReset(zs);  // the next member continues the content
      continue;
    }
    if (rc == Z_STREAM_END || rc == Z_BUF_ERROR) break;  // a short content; errors come later
    if (rc != Z_OK) {
      throw ParseError(path, 0, "corrupt gzip data at the start of the file" + zlib_reason(zs));
    }
  }
  out.resize(max_bytes - zs->avail_out);
  return out;
}

InputBytes::InputBytes(const std::string& path) {
  file_.emplace(path);
  inflate_if_gzip(file_->bytes(), path);
}

InputBytes::InputBytes(std::string_view bytes, const std::string& name) {
  inflate_if_gzip(bytes, name);
}

void InputBytes::inflate_if_gzip(std::string_view raw, const std::string& name) {
  if (!is_gzip(raw)) {
    bytes_ = raw;
    return;
  }
  inflated_ = gunzip(raw, name, memory_budget_bytes());
  bytes_ = std::string_view(inflated_.data.get(), inflated_.size);
  file_.reset();  // the compressed bytes are no longer needed
}

}  // namespace netsparse::sparse_detail

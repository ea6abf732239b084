// Shared by the sparse readers' fuzz targets (fuzz_matrix_market, fuzz_metis): the outcome of
// one read (a value or a ParseError; anything else aborts), the CsrMatrix invariants, a memory
// file the path-taking readers can open, and the comparison of a read from memory with the same
// bytes read from that file and gzipped.
#pragma once

#include <sys/mman.h>
#include <unistd.h>

#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <exception>
#include <optional>
#include <string>
#include <string_view>

#include "../sparse/gzip_test_util.hpp"
#include "csr_blocks.hpp"
#include "netsparse/csr.hpp"
#include "netsparse/sparse_error.hpp"
#include "sparse/input_bytes.hpp"

namespace netsparse::fuzz {

using netsparse::test::row_block;

[[noreturn]] inline void fail(const std::string& what) {
  std::fprintf(stderr, "fuzz: %s\n", what.c_str());
  std::abort();
}

inline void require(bool ok, const std::string& what) {
  if (!ok) fail(what);
}

// For hot loops: the message is only built on failure.
inline void require(bool ok, const char* where, const char* what) {
  if (!ok) fail(std::string(where) + ": " + what);
}

// What a reader did with one input: its result, or the line and reason of its ParseError.
template <class T>
struct Outcome {
  std::optional<T> value;
  std::int64_t line = 0;
  std::string reason;
};

// Runs f; a ParseError is an outcome, any other exception a bug.
template <class F>
auto run(const char* what, F&& f) -> Outcome<decltype(f())> {
  Outcome<decltype(f())> out;
  try {
    out.value.emplace(f());
  } catch (const ParseError& e) {
    if (e.line() < 0) fail(std::string(what) + ": negative line in " + e.what());
    // "FILE:LINE: " for a line, "FILE: " (no ":0:") for the file as a whole.
    const std::string prefix =
        e.line() > 0 ? e.file() + ":" + std::to_string(e.line()) + ": " : e.file() + ": ";
    if (std::string(e.what()).rfind(prefix, 0) != 0 || e.reason().empty()) {
      fail(std::string(what) + ": malformed ParseError " + e.what());
    }
    out.line = e.line();
    out.reason = e.reason();
  } catch (const std::exception& e) {
    fail(std::string(what) + ": exception other than ParseError: " + e.what());
  } catch (...) {
    fail(std::string(what) + ": non-standard exception");
  }
  return out;
}

// Both succeeded, or both failed at the same line for the same reason.
template <class T, class Same>
void require_same_outcome(const Outcome<T>& a, const Outcome<T>& b, const char* what, Same&& same) {
  if (a.value.has_value() != b.value.has_value()) {
    fail(std::string(what) +
         ": one read succeeded, the other failed: " + (a.value ? b.reason : a.reason));
  }
  if (a.value) {
    require(same(*a.value, *b.value), std::string(what) + ": different results");
  } else {
    require(a.line == b.line && a.reason == b.reason,
            std::string(what) + ": different errors: " + std::to_string(a.line) + ": " + a.reason +
                " vs " + std::to_string(b.line) + ": " + b.reason);
  }
}

// The CsrMatrix invariants (csr.hpp): sizes, row_ptr monotone from 0 to nnz, columns in range,
// strictly increasing (sorted and unique) within each row.
inline void check_csr(const CsrMatrix& m, const char* what) {
  require(m.n_rows >= 0 && m.n_cols >= 0 && m.row_begin >= 0 &&
              m.row_begin + m.n_rows <= m.n_rows_global,
          what, "block outside the shape");
  require(m.row_ptr.size() == static_cast<std::size_t>(m.n_rows) + 1, what, "row_ptr size");
  require(m.row_ptr[0] == 0, what, "row_ptr[0] != 0");
  require(m.col_idx.size() == static_cast<std::size_t>(m.nnz()) &&
              m.values.size() == static_cast<std::size_t>(m.nnz()),
          what, "col_idx / values sizes differ from nnz");
  for (gidx_t r = 0; r < m.n_rows; ++r) {
    require(m.row_ptr[r] <= m.row_ptr[r + 1], what, "row_ptr decreases");
    for (std::int64_t k = m.row_ptr[r]; k < m.row_ptr[r + 1]; ++k) {
      require(m.col_idx[k] >= 0 && m.col_idx[k] < m.n_cols, what, "column out of range");
      require(k == m.row_ptr[r] || m.col_idx[k - 1] < m.col_idx[k], what,
              "columns not strictly increasing in a row");
    }
  }
}

// Bitwise equality of values (a NaN sum equals itself; -0.0f differs from 0.0f).
inline bool same_matrix(const CsrMatrix& a, const CsrMatrix& b) {
  if (a.n_rows_global != b.n_rows_global || a.n_cols != b.n_cols || a.row_begin != b.row_begin ||
      a.n_rows != b.n_rows || a.row_ptr != b.row_ptr || a.col_idx != b.col_idx ||
      a.values.size() != b.values.size()) {
    return false;
  }
  for (std::size_t k = 0; k < a.values.size(); ++k) {
    if (__builtin_memcmp(&a.values[k], &b.values[k], sizeof(double)) != 0) return false;
  }
  return true;
}

// FNV-1a: a deterministic choice (a row block, a cut) per input.
inline std::uint64_t hash_bytes(const std::uint8_t* data, std::size_t size) {
  std::uint64_t h = 1469598103934665603ull;
  for (std::size_t i = 0; i < size; ++i) h = (h ^ data[i]) * 1099511628211ull;
  return h;
}

// An in-memory file (memfd) the path-taking readers open as /proc/self/fd/N; each input
// replaces its content.
class MemFile {
 public:
  MemFile() : fd_(memfd_create("netsparse-fuzz", MFD_CLOEXEC)) {
    if (fd_ < 0) fail("memfd_create failed");
    path_ = "/proc/self/fd/" + std::to_string(fd_);
  }
  ~MemFile() { close(fd_); }
  MemFile(const MemFile&) = delete;
  MemFile& operator=(const MemFile&) = delete;

  void write(const std::uint8_t* data, std::size_t size) {
    if (ftruncate(fd_, 0) != 0) fail("ftruncate failed");
    std::size_t done = 0;
    while (done < size) {
      const ssize_t n = pwrite(fd_, data + done, size - done, static_cast<off_t>(done));
      if (n <= 0) fail("pwrite failed");
      done += static_cast<std::size_t>(n);
    }
  }
  [[nodiscard]] const std::string& path() const noexcept { return path_; }

 private:
  int fd_;
  std::string path_;
};

// The reader's other ways to the same bytes agree with parsing them in memory (`mem`): reading
// `file`, which holds them, and (unless they are gzip already) parsing them gzipped as gz_name.
template <class T, class ReadFile, class Parse, class Same>
void require_same_from_file_and_gzip(const Outcome<T>& mem, std::string_view bytes,
                                     const MemFile& file, ReadFile read_file, Parse parse,
                                     const char* gz_name, Same same) {
  const auto disk = run("file", [&] { return read_file(file.path()); });
  require_same_outcome(mem, disk, "memory vs file", same);
  if (!sparse_detail::is_gzip(bytes)) {
    const std::string gz = netsparse::test::gzip_bytes(bytes, 1);
    const auto unzipped = run("gzip", [&] { return parse(gz, gz_name); });
    require_same_outcome(mem, unzipped, "plain vs gzip", same);
  }
}

}  // namespace netsparse::fuzz

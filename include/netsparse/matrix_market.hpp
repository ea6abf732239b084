// Matrix Market (coordinate format) reading and writing.
//
// Accepted: "%%MatrixMarket matrix coordinate {real|integer|pattern}
// {general|symmetric|skew-symmetric}" (keywords case-insensitive), % comments and blank lines
// anywhere after the banner, LF or CRLF line endings, a missing final newline. Symmetric and
// skew-symmetric files must store only the lower triangle (skew-symmetric: strictly below the
// diagonal) and are expanded to both triangles (skew negates the mirror). Duplicate entries are
// summed; explicit zeros are kept; pattern entries get the value 1.0 (a repeated pattern entry
// is still one nonzero of value 1.0: a pattern is a structure). Rejected with a
// ParseError ("FILE:LINE: reason"): everything else, including the array format and complex or
// hermitian matrices, out-of-range or non-numeric indices, values whose magnitude exceeds the
// double range (tiny magnitudes round to zero or a subnormal, as any conversion does; values are
// read in double, see csr.hpp),
// inf and nan, missing or extra tokens, and an entry count that differs from the size line.
//
// Sizes: a header cannot make the reader allocate more than the file justifies. Refused at the
// size line, before anything is allocated:
//   - more entries than the bytes after the size line can hold (an entry line takes at least
//     4 bytes, "1 1\n", or 6 with a value; the last line may lack its '\n');
//   - a row count whose row pointers (8 bytes per row, + 8) exceed the larger of 128 MiB and
//     64 bytes per byte of the file. The format lets a few bytes declare any shape (a
//     1e9 x 1 matrix without entries is legal), but CSR keeps a row pointer for every row, even
//     an empty one: 8 GB for that 61-byte file. The bound is generous for real matrices (it
//     allows 8 rows per byte of the file, and 16.7 million rows for any file) and keeps a tiny
//     file from costing gigabytes (at most about twice the 128 MiB while the rows are
//     assembled). Columns cost no memory and are not bounded.
// Entry storage is then bounded by the file's size. Independently, a row block whose row
// pointers exceed the memory this process can get (physical memory, lowered by RLIMIT_AS /
// RLIMIT_DATA) is refused ("cannot allocate the matrix") before allocating.
//
// Compressed input: a file whose content starts with the gzip magic bytes (1f 8b), whatever its
// name ("x.mtx.gz", "x.mtx"), is decompressed into memory and parsed like any other; line
// numbers in errors are those of the decompressed text. Concatenated gzip members are one
// content. Refused with a ParseError naming the file (line 0): corrupt or truncated gzip data,
// trailing bytes after the last member, and content larger than the memory this process can
// get. Every call that takes a path decompresses the whole file again (the distributed reader
// below: each rank, twice), so large inputs are best read uncompressed (memory-mapped).
//
// Reading is parallel (OpenMP) over byte ranges of a memory-mapped file. A byte range is parsed
// independently of the rest, so a distributed reader can give each rank its own range:
//   header = read_matrix_market_header(path);                 // every rank
//   chunk  = parse_matrix_market_entries(path, header, {my byte range});
//   total  = allreduce(chunk.n_entries);
//   check_matrix_market_entry_count(path, header, total);     // throws the right error
//   ... redistribute chunk.triplets to their row owners, then coo_to_csr(...)
//   ... and for a pattern file set the values to 1.0 (read_matrix_market does the same)
#pragma once

#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <vector>

#include "netsparse/coo.hpp"
#include "netsparse/csr.hpp"
#include "netsparse/sparse_error.hpp"

namespace netsparse {

enum class MatrixMarketField { real, integer, pattern };
enum class MatrixMarketSymmetry { general, symmetric, skew_symmetric };

struct MatrixMarketHeader {
  MatrixMarketField field = MatrixMarketField::real;
  MatrixMarketSymmetry symmetry = MatrixMarketSymmetry::general;
  gidx_t n_rows = 0;
  gidx_t n_cols = 0;
  std::int64_t n_entries = 0;     // entry lines the size line declares (before expansion)
  std::int64_t size_line = 0;     // 1-based line number of the size line
  std::uint64_t data_offset = 0;  // byte offset of the first line after the size line
  std::uint64_t file_size = 0;    // bytes of the content (decompressed, for gzip data)
};

// Reads the banner, comments and size line. Throws ParseError.
MatrixMarketHeader read_matrix_market_header(const std::string& path);

struct MatrixMarketEntryRange {
  // The entry lines that START in [byte_begin, byte_end) are parsed; a range may begin or end
  // in the middle of a line (that line belongs to the range its first byte is in), so ranges
  // that tile [0, file_size) parse every line exactly once. Bytes before header.data_offset
  // are never parsed as entries.
  std::uint64_t byte_begin = 0;
  std::uint64_t byte_end = std::numeric_limits<std::uint64_t>::max();
  // Only expanded entries whose (0-based) row lies in [keep_row_begin, keep_row_end) are
  // returned; every entry in the range is still validated.
  gidx_t keep_row_begin = 0;
  gidx_t keep_row_end = std::numeric_limits<gidx_t>::max();
};

struct MatrixMarketChunk {
  std::vector<Triplet> triplets;  // 0-based, expanded (symmetric mirror included), filtered
  std::int64_t n_entries = 0;     // entry lines parsed in the range (before expansion)
};

// Parses the entry lines of one byte range (see MatrixMarketEntryRange). Throws ParseError with
// the file's true line number. Does not check the total entry count: the caller sums
// n_entries over all ranges and calls check_matrix_market_entry_count.
MatrixMarketChunk parse_matrix_market_entries(const std::string& path,
                                              const MatrixMarketHeader& header,
                                              const MatrixMarketEntryRange& range = {});

// Throws ParseError if entries_found (over the whole file) differs from header.n_entries:
// "too many" points at the first surplus entry line, "too few" at the file's last line.
void check_matrix_market_entry_count(const std::string& path, const MatrixMarketHeader& header,
                                     std::int64_t entries_found);

// The whole matrix.
CsrMatrix read_matrix_market(const std::string& path);

// Only rows [row_begin, row_end) (0-based; the block's row_begin is row_begin). The whole file
// is still parsed and validated. Throws std::invalid_argument if the rows are not inside the
// matrix.
CsrMatrix read_matrix_market(const std::string& path, gidx_t row_begin, gidx_t row_end);

// The whole matrix from bytes in memory (gzip-compressed or not), parsed exactly as a file with
// that content; `name` stands for the file in ParseError messages.
CsrMatrix parse_matrix_market(std::string_view bytes, const std::string& name = "<memory>");

// True if the file's content (decompressed first if it is gzip data) starts with the Matrix
// Market banner word "%%MatrixMarket" (any case, after optional blanks): how a reader that
// takes both formats tells them apart without trusting the file's name. Reads (and inflates)
// only the first bytes. Throws ParseError if the file cannot be opened or its compressed start
// is corrupt.
bool is_matrix_market_file(const std::string& path);

// Writes "%%MatrixMarket matrix coordinate {real|pattern} general": the matrix's global shape
// (n_rows_global x n_cols) with the entries of its row block. Values are written in the
// shortest form that reads back to the same double, so write + read is exact. Throws
// std::runtime_error if the file cannot be written, std::invalid_argument if the matrix is
// inconsistent (row_ptr size, column out of range).
void write_matrix_market(const std::string& path, const CsrMatrix& matrix, bool pattern = false);

}  // namespace netsparse

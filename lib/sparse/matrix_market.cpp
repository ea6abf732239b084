// Matrix Market reader and writer.
//
// Reading: the file is memory-mapped (or, if it is gzip data, decompressed into memory); the
// header is parsed serially, the entry lines in parallel byte ranges. A range parser counts no
// lines on the fast path: when it meets an error it counts the newlines before the bad line (a cold
// path), which gives the same line number a serial reader would report, for any split.
#include "netsparse/matrix_market.hpp"

#include <omp.h>

#include <algorithm>
#include <array>
#include <cerrno>
#include <charconv>
#include <cstdio>
#include <cstring>
#include <exception>
#include <memory>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sparse/coo_assembly.hpp"
#include "sparse/input_bytes.hpp"
#include "sparse/text_scan.hpp"

namespace netsparse {

namespace {

using sparse_detail::assemble_csr;
using sparse_detail::CompactTriplet;
using sparse_detail::count_lines;
using sparse_detail::count_newlines;
using sparse_detail::human_bytes;
using sparse_detail::InputBytes;
using sparse_detail::line_end;
using sparse_detail::NumberStatus;
using sparse_detail::parse_integer;
using sparse_detail::parse_real;
using sparse_detail::quoted_token;
using sparse_detail::skip_blanks;
using sparse_detail::token_end;

std::string lowercase(std::string_view s) {
  std::string out(s);
  for (char& c : out) {
    if (c >= 'A' && c <= 'Z') c = static_cast<char>(c - 'A' + 'a');
  }
  return out;
}

// Splits [p, end) into blank-separated tokens.
std::vector<std::string_view> split_tokens(const char* p, const char* end) {
  std::vector<std::string_view> tokens;
  for (p = skip_blanks(p, end); p < end; p = skip_blanks(p, end)) {
    const char* e = token_end(p, end);
    tokens.emplace_back(p, static_cast<size_t>(e - p));
    p = e;
  }
  return tokens;
}

bool is_comment_or_blank(const char* p, const char* eol) {
  p = skip_blanks(p, eol);
  return p == eol || *p == '%';
}

// The banner's field and symmetry words this reader reads, each once: parse_banner looks them
// up, error messages list them, field_name prints them.
template <class E>
using BannerWords = std::pair<const char*, E>[3];
constexpr BannerWords<MatrixMarketField> kFieldWords = {{"real", MatrixMarketField::real},
                                                        {"integer", MatrixMarketField::integer},
                                                        {"pattern", MatrixMarketField::pattern}};
constexpr BannerWords<MatrixMarketSymmetry> kSymmetryWords = {
    {"general", MatrixMarketSymmetry::general},
    {"symmetric", MatrixMarketSymmetry::symmetric},
    {"skew-symmetric", MatrixMarketSymmetry::skew_symmetric}};

const char* field_name(MatrixMarketField field) {
  for (const auto& [name, value] : kFieldWords) {
    if (value == field) return name;
  }
  return "?";
}

// The value of banner word `what` (lowercased: `word`, as the file spells it: `original`) among
// `words`; a ParseError on line 1 for `unsupported` (a value of the format this reader does not
// read) and for any other word, both listing the supported ones.
template <class E>
E banner_word(const char* what, const std::string& word, std::string_view original,
              const BannerWords<E>& words, const char* unsupported, const std::string& path) {
  for (const auto& [name, value] : words) {
    if (word == name) return value;
  }
  std::string supported;
  for (const auto& w : words) supported += (supported.empty() ? "" : ", ") + std::string(w.first);
  if (word == unsupported) {
    throw ParseError(path, 1,
                     "unsupported " + std::string(what) + " '" + unsupported +
                         "' (supported: " + supported + ")");
  }
  throw ParseError(path, 1,
                   "unknown " + std::string(what) + " '" + std::string(original) +
                       "' in banner (supported: " + supported + ")");
}

// What a file of a given size can justify (see matrix_market.hpp, "Sizes"): row pointers up to
// max(kRowPointerFloor, kRowPointerPerByte x the file's size) bytes, and no more entry lines
// than the bytes after the size line can hold.
constexpr double kRowPointerFloor = 128.0 * 1024 * 1024;
constexpr double kRowPointerPerByte = 64.0;

void check_justified_by_size(const MatrixMarketHeader& header, const std::string& path) {
  // Shortest entry line: "1 1" (pattern) or "1 1 1", plus its '\n' (the last may lack it).
  const std::uint64_t min_line = header.field == MatrixMarketField::pattern ? 4 : 6;
  const std::uint64_t data_bytes = header.file_size - header.data_offset;
  const std::uint64_t max_entries = (data_bytes + 1) / min_line;
  if (static_cast<std::uint64_t>(header.n_entries) > max_entries) {
    throw ParseError(path, header.size_line,
                     "the size line declares " + std::to_string(header.n_entries) +
                         " entries but the " + std::to_string(data_bytes) +
                         " bytes after it can hold at most " + std::to_string(max_entries) +
                         " (an entry line takes at least " + std::to_string(min_line) +
                         " bytes; truncated file?)");
  }
  const double row_pointer_bytes = (static_cast<double>(header.n_rows) + 1.0) * 8.0;
  const double justified =
      std::max(kRowPointerFloor, kRowPointerPerByte * static_cast<double>(header.file_size));
  if (row_pointer_bytes > justified) {
    throw ParseError(path, header.size_line,
                     "the size line declares " + std::to_string(header.n_rows) +
                         " rows, whose row pointers alone would take " +
                         human_bytes(row_pointer_bytes) + ": more than a " +
                         std::to_string(header.file_size) +
                         "-byte file can justify (at most the larger of 128 MiB and 64 bytes "
                         "per byte of the file; CSR keeps a row pointer for every row, even an "
                         "empty one)");
  }
}

// The banner (line 1, [begin, eol)): the field and the symmetry of the header.
MatrixMarketHeader parse_banner(const char* begin, const char* eol, const std::string& path) {
  const std::vector<std::string_view> banner = split_tokens(begin, eol);
  const std::string usage =
      "'%%MatrixMarket matrix coordinate <real|integer|pattern> "
      "<general|symmetric|skew-symmetric>'";
  if (banner.empty() || lowercase(banner[0]) != "%%matrixmarket") {
    throw ParseError(path, 1, "missing banner: the first line must be " + usage);
  }
  if (banner.size() != 5) {
    throw ParseError(path, 1,
                     "bad banner: expected " + usage + ", got " +
                         std::to_string(banner.size() - 1) + " words after %%MatrixMarket");
  }
  const std::string object = lowercase(banner[1]);
  const std::string format = lowercase(banner[2]);
  const std::string field = lowercase(banner[3]);
  const std::string symmetry = lowercase(banner[4]);
  if (object != "matrix") {
    throw ParseError(path, 1,
                     "unsupported object '" + std::string(banner[1]) +
                         "' in banner (only 'matrix' is supported)");
  }
  if (format == "array") {
    throw ParseError(path, 1, "unsupported format 'array' (only 'coordinate' is supported)");
  }
  if (format != "coordinate") {
    throw ParseError(path, 1,
                     "unknown format '" + std::string(banner[2]) +
                         "' in banner (only 'coordinate' is supported)");
  }
  MatrixMarketHeader header;
  header.field = banner_word("field", field, banner[3], kFieldWords, "complex", path);
  header.symmetry = banner_word("symmetry", symmetry, banner[4], kSymmetryWords, "hermitian", path);
  if (header.field == MatrixMarketField::pattern &&
      header.symmetry == MatrixMarketSymmetry::skew_symmetric) {
    throw ParseError(path, 1, "a pattern matrix cannot be skew-symmetric (no values to negate)");
  }

  return header;
}

// The size line [p, eol) (line `line`): rows, columns, entries.
std::array<std::int64_t, 3> parse_size_line(const char* p, const char* eol, std::int64_t line,
                                            const std::string& path) {
  std::array<std::int64_t, 3> sizes = {0, 0, 0};
  const char* const size_names[3] = {"row count", "column count", "entry count"};
  const char* q = skip_blanks(p, eol);
  for (int k = 0; k < 3; ++k) {
    if (q == eol) {
      throw ParseError(path, line,
                       std::string("bad size line: missing ") + size_names[k] +
                           " (expected 'rows columns entries')");
    }
    const auto parsed = parse_integer(q, eol, /*allow_negative=*/false);
    switch (parsed.status) {
      case NumberStatus::ok:
        break;
      case NumberStatus::negative:
        throw ParseError(
            path, line,
            std::string("bad size line: negative ") + size_names[k] + " " + quoted_token(q, eol));
      case NumberStatus::out_of_range:
        throw ParseError(path, line,
                         std::string("bad size line: ") + size_names[k] + " " +
                             quoted_token(q, eol) + " overflows a 64-bit integer");
      case NumberStatus::not_numeric:
        throw ParseError(path, line,
                         std::string("bad size line: ") + size_names[k] + " " +
                             quoted_token(q, eol) + " is not a non-negative integer");
    }
    sizes[k] = parsed.value;
    q = skip_blanks(parsed.next, eol);
  }
  if (q != eol) {
    throw ParseError(path, line,
                     "bad size line: extra token " + quoted_token(q, eol) +
                         " (expected 'rows columns entries'; only coordinate format is "
                         "supported)");
  }
  return sizes;
}

MatrixMarketHeader parse_header(std::string_view bytes, const std::string& path) {
  const char* const file_begin = bytes.data();
  const char* const file_end = file_begin + bytes.size();
  if (bytes.empty()) throw ParseError(path, 1, "empty file (expected a %%MatrixMarket banner)");

  // Banner: line 1.
  const char* eol = line_end(file_begin, file_end);
  MatrixMarketHeader header = parse_banner(file_begin, eol, path);

  // Comments and blank lines, then the size line.
  std::int64_t line = 1;
  const char* p = eol < file_end ? eol + 1 : file_end;
  while (p < file_end) {
    eol = line_end(p, file_end);
    ++line;
    if (!is_comment_or_blank(p, eol)) break;
    p = eol < file_end ? eol + 1 : file_end;
  }
  if (p >= file_end) {
    throw ParseError(path, line + 1,
                     "missing size line 'rows columns entries' (file ends after the banner)");
  }
  header.size_line = line;
  const std::array<std::int64_t, 3> sizes = parse_size_line(p, eol, line, path);
  header.n_rows = sizes[0];
  header.n_cols = sizes[1];
  header.n_entries = sizes[2];
  if (header.symmetry != MatrixMarketSymmetry::general && header.n_rows != header.n_cols) {
    throw ParseError(path, line,
                     "a symmetric or skew-symmetric matrix must be square, got " +
                         std::to_string(header.n_rows) + " x " + std::to_string(header.n_cols));
  }
  // Duplicates are legal, so the entry count has no upper bound, except for a matrix that
  // cannot hold any entry.
  const bool can_hold_entries =
      header.n_rows > 0 && header.n_cols > 0 &&
      !(header.symmetry == MatrixMarketSymmetry::skew_symmetric && header.n_rows == 1);
  if (!can_hold_entries && header.n_entries > 0) {
    throw ParseError(path, line,
                     "size line declares " + std::to_string(header.n_entries) + " entries for a " +
                         std::to_string(header.n_rows) + " x " + std::to_string(header.n_cols) +
                         " matrix that can hold none");
  }
  header.data_offset =
      static_cast<std::uint64_t>((eol < file_end ? eol + 1 : file_end) - file_begin);
  header.file_size = bytes.size();
  check_justified_by_size(header, path);
  return header;
}

// Parses the entry lines of one byte range; `emit(row, col, value)` receives 0-based,
// expanded, unfiltered entries. Returns the number of entry lines.
class EntryParser {
 public:
  EntryParser(std::string_view bytes, const MatrixMarketHeader& header, const std::string& path)
      : bytes_(bytes), header_(header), path_(path) {}

  template <class Emit>
  std::int64_t parse(std::uint64_t byte_begin, std::uint64_t byte_end, Emit&& emit) const {
    const char* const file_begin = bytes_.data();
    const char* const file_end = file_begin + bytes_.size();
    const std::uint64_t begin = std::max(byte_begin, header_.data_offset);
    const std::uint64_t end = std::min<std::uint64_t>(byte_end, bytes_.size());
    if (begin >= end) return 0;
    const char* p = file_begin + begin;
    // A line belongs to the range holding its first byte: skip the tail of a line that
    // started before this range.
    if (begin > header_.data_offset && p[-1] != '\n') {
      p = line_end(p, file_end);
      if (p == file_end) return 0;
      ++p;
    }
    const char* const range_end = file_begin + end;
    const bool is_pattern = header_.field == MatrixMarketField::pattern;
    const bool is_integer = header_.field == MatrixMarketField::integer;
    const MatrixMarketSymmetry symmetry = header_.symmetry;
    std::int64_t n_entries = 0;
    while (p < range_end) {
      const char* const eol = line_end(p, file_end);
      const char* q = skip_blanks(p, eol);
      if (q == eol || *q == '%') {
        if (eol == file_end) break;
        p = eol + 1;
        continue;
      }
      const gidx_t row = parse_index(q, eol, p, "row", header_.n_rows);
      q = skip_blanks(q, eol);
      if (q == eol) fail(p, "missing column index (an entry is 'row column" + value_usage() + "')");
      const gidx_t col = parse_index(q, eol, p, "column", header_.n_cols);
      double value = 1.0;
      if (!is_pattern) {
        q = skip_blanks(q, eol);
        if (q == eol) {
          fail(p, std::string("missing value (the field is ") + field_name(header_.field) + ")");
        }
        value = is_integer ? parse_integer_value(q, eol, p) : parse_real_value(q, eol, p);
      }
      q = skip_blanks(q, eol);
      if (q != eol) {
        fail(p, "extra token " + quoted_token(q, eol) +
                    " after the entry (an entry is 'row column" + value_usage() + "')");
      }
      ++n_entries;
      if (symmetry == MatrixMarketSymmetry::general) {
        emit(row - 1, col - 1, value);
      } else {
        check_triangle(row, col, p);
        emit(row - 1, col - 1, value);
        if (row != col) {
          emit(col - 1, row - 1, symmetry == MatrixMarketSymmetry::skew_symmetric ? -value : value);
        }
      }
      if (eol == file_end) break;
      p = eol + 1;
    }
    return n_entries;
  }

  // Line number of the line starting at line_start (a cold path: counts newlines).
  [[nodiscard]] std::int64_t line_number(const char* line_start) const {
    const char* data = bytes_.data() + header_.data_offset;
    return header_.size_line + 1 + count_newlines(data, line_start);
  }

  [[noreturn]] void fail(const char* line_start, const std::string& reason) const {
    throw ParseError(path_, line_number(line_start), reason);
  }

 private:
  [[nodiscard]] std::string value_usage() const {
    return header_.field == MatrixMarketField::pattern ? "" : " value";
  }

  // Parses a 1-based index in [1, dimension] and advances q past it. Inlined: it runs twice
  // per entry; the error path is out of line.
  [[gnu::always_inline]] gidx_t parse_index(const char*& q, const char* eol, const char* line_start,
                                            const char* what, gidx_t dimension) const {
    const auto parsed = parse_integer(q, eol, /*allow_negative=*/false);
    if (parsed.status == NumberStatus::ok && parsed.value >= 1 && parsed.value <= dimension)
        [[likely]] {
      q = parsed.next;
      return parsed.value;
    }
    index_error(parsed, q, eol, line_start, what, dimension);
  }

  [[noreturn, gnu::cold, gnu::noinline]] void index_error(
      const sparse_detail::ParsedInteger& parsed, const char* q, const char* eol,
      const char* line_start, const char* what, gidx_t dimension) const {
    const std::string token = quoted_token(q, eol);
    switch (parsed.status) {
      case NumberStatus::negative:
        fail(line_start, std::string("negative ") + what + " index " + token);
      case NumberStatus::out_of_range:
        fail(line_start, std::string(what) + " index " + token + " overflows a 64-bit integer");
      case NumberStatus::not_numeric:
        fail(line_start,
             std::string("non-numeric ") + what + " index " + token + " (expected an integer)");
      case NumberStatus::ok:
        break;
    }
    if (parsed.value == 0) {
      fail(line_start, std::string(what) + " index 0 is out of range [1, " +
                           std::to_string(dimension) + "] (indices are 1-based)");
    }
    fail(line_start, std::string(what) + " index " + std::to_string(parsed.value) +
                         " is out of range [1, " + std::to_string(dimension) + "]");
  }

  double parse_real_value(const char*& q, const char* eol, const char* line_start) const {
    const auto parsed = parse_real(q, eol);
    if (parsed.status == NumberStatus::ok) [[likely]] {
      q = parsed.next;
      return parsed.value;
    }
    if (parsed.status == NumberStatus::out_of_range) {
      fail(line_start, "value " + quoted_token(q, eol) + " is out of the double range");
    }
    fail(line_start, "non-numeric value " + quoted_token(q, eol) + " (expected a finite real)");
  }

  double parse_integer_value(const char*& q, const char* eol, const char* line_start) const {
    const auto parsed = parse_integer(q, eol, /*allow_negative=*/true);
    if (parsed.status == NumberStatus::ok) [[likely]] {
      q = parsed.next;
      return static_cast<double>(parsed.value);
    }
    if (parsed.status == NumberStatus::out_of_range) {
      fail(line_start, "integer value " + quoted_token(q, eol) + " overflows a 64-bit integer");
    }
    fail(line_start, "value " + quoted_token(q, eol) + " is not an integer (the field is integer)");
  }

  void check_triangle(gidx_t row, gidx_t col, const char* line_start) const {
    if (header_.symmetry == MatrixMarketSymmetry::skew_symmetric && row == col) [[unlikely]] {
      fail(line_start, "diagonal entry (" + std::to_string(row) + ", " + std::to_string(col) +
                           ") in a skew-symmetric matrix (its diagonal is zero by definition)");
    }
    if (row < col) [[unlikely]] {
      fail(line_start, "entry (" + std::to_string(row) + ", " + std::to_string(col) +
                           ") is above the diagonal: a symmetric or skew-symmetric file stores "
                           "only the lower triangle");
    }
  }

  std::string_view bytes_;
  const MatrixMarketHeader& header_;
  const std::string& path_;
};

// The line of the k-th (1-based) entry line, or 0 if the file has fewer (a cold path).
std::int64_t find_entry_line(std::string_view bytes, const MatrixMarketHeader& header,
                             std::int64_t k) {
  const char* const file_end = bytes.data() + bytes.size();
  const char* p = bytes.data() + header.data_offset;
  std::int64_t line = header.size_line;
  std::int64_t seen = 0;
  while (p < file_end) {
    const char* eol = line_end(p, file_end);
    ++line;
    if (!is_comment_or_blank(p, eol) && ++seen == k) return line;
    if (eol == file_end) break;
    p = eol + 1;
  }
  return 0;
}

void check_entry_count(std::string_view bytes, const MatrixMarketHeader& header,
                       const std::string& path, std::int64_t entries_found) {
  const std::string declared = "the " + std::to_string(header.n_entries) +
                               " entries declared on line " + std::to_string(header.size_line);
  if (entries_found > header.n_entries) {
    const std::int64_t line = find_entry_line(bytes, header, header.n_entries + 1);
    throw ParseError(path, line,
                     "too many entries: this is entry " + std::to_string(header.n_entries + 1) +
                         ", more than " + declared);
  }
  if (entries_found < header.n_entries) {
    throw ParseError(path, std::max<std::int64_t>(count_lines(bytes), 1),
                     "file ends after " + std::to_string(entries_found) + " of " + declared +
                         " (truncated file?)");
  }
}

// About how many triplets a byte range yields, from the mean line length of its first 64 KB
// (regrowing the vector would copy and fault in memory twice), scaled by symmetric expansion
// and by the fraction of rows kept.
size_t estimate_triplets(std::string_view bytes, const MatrixMarketHeader& header,
                         std::uint64_t byte_begin, std::uint64_t byte_end, gidx_t keep_begin,
                         gidx_t keep_end) {
  const std::uint64_t begin = std::max(byte_begin, header.data_offset);
  const std::uint64_t end = std::min<std::uint64_t>(byte_end, bytes.size());
  if (begin >= end || header.n_rows == 0) return 0;
  const std::uint64_t sample_end = std::min<std::uint64_t>(end, begin + (1 << 16));
  const std::int64_t sample_lines =
      count_newlines(bytes.data() + begin, bytes.data() + sample_end) + 1;
  double lines = static_cast<double>(end - begin) * static_cast<double>(sample_lines) /
                 static_cast<double>(sample_end - begin);
  if (header.symmetry != MatrixMarketSymmetry::general) lines *= 2.0;
  const gidx_t kept = std::min(keep_end, header.n_rows) - std::max<gidx_t>(keep_begin, 0);
  if (kept <= 0) return 0;
  lines *= static_cast<double>(kept) / static_cast<double>(header.n_rows);
  return static_cast<size_t>(lines * 1.05) + 16;
}

// Parses [byte_begin, byte_end) of a mapped file into records (Triplet or CompactTriplet),
// keeping rows in [keep_begin, keep_end). Returns the number of entry lines parsed.
template <class Record>
std::int64_t parse_range(std::string_view bytes, const MatrixMarketHeader& header,
                         const std::string& path, std::uint64_t byte_begin, std::uint64_t byte_end,
                         gidx_t keep_begin, gidx_t keep_end, std::vector<Record>& out) {
  out.reserve(estimate_triplets(bytes, header, byte_begin, byte_end, keep_begin, keep_end));
  const EntryParser parser(bytes, header, path);
  using Index = decltype(Record::row);
  if (keep_begin <= 0 && keep_end >= header.n_rows) {
    return parser.parse(byte_begin, byte_end, [&](gidx_t r, gidx_t c, double v) {
      out.push_back({static_cast<Index>(r), static_cast<Index>(c), v});
    });
  }
  return parser.parse(byte_begin, byte_end, [&](gidx_t r, gidx_t c, double v) {
    if (r >= keep_begin && r < keep_end) {
      out.push_back({static_cast<Index>(r), static_cast<Index>(c), v});
    }
  });
}

// Files below this size are parsed by one thread.
constexpr std::uint64_t kParallelBytes = std::uint64_t{1} << 20;

// Parses the whole file in parallel byte ranges and assembles rows [row_begin, row_end).
template <class Record>
CsrMatrix parse_and_assemble(std::string_view bytes, const MatrixMarketHeader& header,
                             const std::string& path, gidx_t row_begin, gidx_t row_end) {
  const std::uint64_t data_bytes = bytes.size() - header.data_offset;
  const int n_threads = data_bytes >= kParallelBytes ? omp_get_max_threads() : 1;
  // A few ranges per thread balance uneven line lengths and comment blocks.
  const int n_ranges = n_threads == 1 ? 1 : 4 * n_threads;
  std::vector<std::vector<Record>> records(static_cast<size_t>(n_ranges));
  std::vector<std::int64_t> entries(static_cast<size_t>(n_ranges), 0);
  std::optional<ParseError> first_error;
  std::exception_ptr other_error;
#pragma omp parallel for schedule(dynamic, 1) num_threads(n_threads)
  for (int k = 0; k < n_ranges; ++k) {
    const std::uint64_t b = header.data_offset + data_bytes * k / n_ranges;
    const std::uint64_t e = header.data_offset + data_bytes * (k + 1) / n_ranges;
    try {
      entries[k] = parse_range(bytes, header, path, b, e, row_begin, row_end, records[k]);
    } catch (const ParseError& error) {
      // Report the error a serial reader would have met first.
#pragma omp critical(netsparse_mm_error)
      if (!first_error || error.line() < first_error->line()) first_error = error;
    } catch (...) {
#pragma omp critical(netsparse_mm_error)
      other_error = std::current_exception();
    }
  }
  if (first_error) throw *first_error;
  if (other_error) std::rethrow_exception(other_error);

  std::int64_t entries_found = 0;
  for (const std::int64_t n : entries) entries_found += n;
  check_entry_count(bytes, header, path, entries_found);

  std::vector<std::span<const Record>> parts(records.begin(), records.end());
  // The parser has checked every index against the matrix and kept only the block's rows.
  return assemble_csr(std::span<const std::span<const Record>>(parts), header.n_rows, header.n_cols,
                      row_begin, row_end, /*trusted=*/true);
}

// A well-formed header can still declare more rows than this machine can index (the row
// pointer alone needs 8 bytes per row): say so at the size line instead of a bare bad_alloc.
[[noreturn]] void throw_too_large(const std::string& path, const MatrixMarketHeader& header,
                                  gidx_t rows) {
  throw ParseError(path, header.size_line,
                   "cannot allocate the matrix: " + std::to_string(rows) + " rows and " +
                       std::to_string(header.n_entries) + " entries do not fit in memory");
}

CsrMatrix read_rows(std::string_view bytes, const std::string& path,
                    std::optional<std::pair<gidx_t, gidx_t>> rows) {
  const MatrixMarketHeader header = parse_header(bytes, path);
  gidx_t row_begin = 0;
  gidx_t row_end = header.n_rows;
  if (rows) {
    std::tie(row_begin, row_end) = *rows;
    if (row_begin < 0 || row_begin > row_end || row_end > header.n_rows) {
      throw std::invalid_argument(path + ": rows [" + std::to_string(row_begin) + ", " +
                                  std::to_string(row_end) + ") are not inside the " +
                                  std::to_string(header.n_rows) + " rows of the matrix");
    }
  }

  // Matrices up to 2^32 x 2^32 are parsed into half-size records.
  const gidx_t compact_limit = gidx_t{1} << 32;
  // Refuse before allocating: the row pointer alone needs 8 bytes per row, and a request beyond
  // the memory this process can get must not reach the allocator (sanitizers abort on it).
  if ((static_cast<double>(row_end - row_begin) + 1.0) * sizeof(std::int64_t) >
      static_cast<double>(sparse_detail::memory_budget_bytes())) {
    throw_too_large(path, header, row_end - row_begin);
  }
  CsrMatrix matrix;
  try {
    matrix = header.n_rows <= compact_limit && header.n_cols <= compact_limit
                 ? parse_and_assemble<CompactTriplet>(bytes, header, path, row_begin, row_end)
                 : parse_and_assemble<Triplet>(bytes, header, path, row_begin, row_end);
  } catch (const std::bad_alloc&) {
    throw_too_large(path, header, row_end - row_begin);
  } catch (const std::length_error&) {
    throw_too_large(path, header, row_end - row_begin);
  }
  // A pattern is a structure: a repeated entry is still one nonzero of value 1.
  if (header.field == MatrixMarketField::pattern) {
    std::fill(matrix.values.begin(), matrix.values.end(), 1.0);
  }
  return matrix;
}

// ---- writer -------------------------------------------------------------------------------

// The most bytes format_rows writes per nonzero: two 20-digit indices, a shortest double (at
// most 24 characters, e.g. "-2.2250738585072014e-308"), separators.
constexpr size_t kMaxLineBytes = 20 + 1 + 20 + 1 + 25 + 1;

// Writes "row col[ value]\n" lines for rows [r0, r1) of m to out, which has room for
// kMaxLineBytes per nonzero; returns the end of what was written.
char* format_rows(const CsrMatrix& m, gidx_t r0, gidx_t r1, bool pattern, char* out,
                  char* const out_end) {
  for (gidx_t r = r0; r < r1; ++r) {
    const gidx_t row_label = m.row_begin + r + 1;
    for (std::int64_t k = m.row_ptr[r]; k < m.row_ptr[r + 1]; ++k) {
      out = std::to_chars(out, out_end, row_label).ptr;
      *out++ = ' ';
      out = std::to_chars(out, out_end, m.col_idx[k] + 1).ptr;
      if (!pattern) {
        *out++ = ' ';
        out = std::to_chars(out, out_end, m.values[k]).ptr;  // shortest round-trip form
      }
      *out++ = '\n';
    }
  }
  return out;
}

void validate_for_writing(const CsrMatrix& m) {
  const auto fail = [](const std::string& what) {
    throw std::invalid_argument("write_matrix_market: inconsistent matrix: " + what);
  };
  if (m.n_rows < 0 || m.row_begin < 0 || m.row_begin + m.n_rows > m.n_rows_global || m.n_cols < 0) {
    fail("block rows outside the global shape");
  }
  if (m.row_ptr.size() != static_cast<size_t>(m.n_rows) + 1 || m.row_ptr[0] != 0) {
    fail("row_ptr must have n_rows + 1 entries starting at 0");
  }
  for (gidx_t r = 0; r < m.n_rows; ++r) {
    if (m.row_ptr[r + 1] < m.row_ptr[r]) fail("row_ptr decreases at row " + std::to_string(r));
  }
  if (m.col_idx.size() != static_cast<size_t>(m.nnz()) ||
      m.values.size() != static_cast<size_t>(m.nnz())) {
    fail("col_idx and values must have nnz entries");
  }
  for (const gidx_t c : m.col_idx) {
    if (c < 0 || c >= m.n_cols) fail("column " + std::to_string(c) + " out of range");
  }
}

struct FileCloser {
  void operator()(std::FILE* f) const { std::fclose(f); }
};

}  // namespace

MatrixMarketHeader read_matrix_market_header(const std::string& path) {
  const InputBytes file(path);
  return parse_header(file.bytes(), path);
}

MatrixMarketChunk parse_matrix_market_entries(const std::string& path,
                                              const MatrixMarketHeader& header,
                                              const MatrixMarketEntryRange& range) {
  const InputBytes file(path);
  if (file.bytes().size() != header.file_size) {
    throw ParseError(path, 0, "file changed size since its header was read");
  }
  MatrixMarketChunk chunk;
  chunk.n_entries = parse_range(file.bytes(), header, path, range.byte_begin, range.byte_end,
                                range.keep_row_begin, range.keep_row_end, chunk.triplets);
  return chunk;
}

void check_matrix_market_entry_count(const std::string& path, const MatrixMarketHeader& header,
                                     std::int64_t entries_found) {
  if (entries_found == header.n_entries) return;
  const InputBytes file(path);
  check_entry_count(file.bytes(), header, path, entries_found);
}

CsrMatrix read_matrix_market(const std::string& path) {
  const InputBytes file(path);
  return read_rows(file.bytes(), path, std::nullopt);
}

CsrMatrix read_matrix_market(const std::string& path, gidx_t row_begin, gidx_t row_end) {
  const InputBytes file(path);
  return read_rows(file.bytes(), path, std::make_pair(row_begin, row_end));
}

CsrMatrix parse_matrix_market(std::string_view bytes, const std::string& name) {
  const InputBytes content(bytes, name);
  return read_rows(content.bytes(), name, std::nullopt);
}

bool is_matrix_market_file(const std::string& path) {
  // The banner's first word, after optional blanks (as parse_header reads it).
  const std::string prefix = sparse_detail::content_prefix(path, 256);
  const char* p = skip_blanks(prefix.data(), prefix.data() + prefix.size());
  const char* e = token_end(p, line_end(p, prefix.data() + prefix.size()));
  return lowercase(std::string_view(p, static_cast<size_t>(e - p))) == "%%matrixmarket";
}

void write_matrix_market(const std::string& path, const CsrMatrix& matrix, bool pattern) {
  validate_for_writing(matrix);
  std::unique_ptr<std::FILE, FileCloser> file(std::fopen(path.c_str(), "wb"));
  const auto io_error = [&](const char* what) {
    return std::runtime_error("write_matrix_market: cannot " + std::string(what) + " " + path +
                              ": " + std::strerror(errno));
  };
  if (!file) throw io_error("create");
  std::string head = "%%MatrixMarket matrix coordinate ";
  head += pattern ? "pattern" : "real";
  head += " general\n% written by NetSparse\n";
  head += std::to_string(matrix.n_rows_global) + " " + std::to_string(matrix.n_cols) + " " +
          std::to_string(matrix.nnz()) + "\n";
  if (std::fwrite(head.data(), 1, head.size(), file.get()) != head.size()) throw io_error("write");

  // Rows are formatted in parallel in batches of about kBatchEntries nonzeros per thread, so
  // memory stays bounded, and written in order.
  constexpr std::int64_t kBatchEntries = std::int64_t{1} << 20;
  const int n_threads = matrix.nnz() >= kBatchEntries ? omp_get_max_threads() : 1;
  std::vector<std::string> buffers(static_cast<size_t>(n_threads));
  std::vector<size_t> lengths(static_cast<size_t>(n_threads));
  std::vector<gidx_t> cuts(static_cast<size_t>(n_threads) + 1);
  gidx_t row = 0;
  while (row < matrix.n_rows) {
    // Cut [row, ...) into n_threads slices of about kBatchEntries nonzeros each.
    cuts[0] = row;
    for (int t = 1; t <= n_threads; ++t) {
      const std::int64_t target = matrix.row_ptr[cuts[t - 1]] + kBatchEntries;
      const auto it =
          std::lower_bound(matrix.row_ptr.begin() + cuts[t - 1] + 1, matrix.row_ptr.end(), target);
      cuts[t] = std::min<gidx_t>(static_cast<gidx_t>(it - matrix.row_ptr.begin()), matrix.n_rows);
    }
    // Sized here: nothing inside the parallel region may throw.
    for (int t = 0; t < n_threads; ++t) {
      const std::int64_t entries = matrix.row_ptr[cuts[t + 1]] - matrix.row_ptr[cuts[t]];
      buffers[t].resize(static_cast<size_t>(entries) * kMaxLineBytes);
      lengths[t] = 0;
    }
#pragma omp parallel for schedule(static, 1) num_threads(n_threads)
    for (int t = 0; t < n_threads; ++t) {
      char* const begin = buffers[t].data();
      lengths[t] = static_cast<size_t>(
          format_rows(matrix, cuts[t], cuts[t + 1], pattern, begin, begin + buffers[t].size()) -
          begin);
    }
    for (int t = 0; t < n_threads; ++t) {
      if (std::fwrite(buffers[t].data(), 1, lengths[t], file.get()) != lengths[t]) {
        throw io_error("write");
      }
    }
    row = cuts[n_threads];
  }
  if (std::fclose(file.release()) != 0) throw io_error("close");
}

}  // namespace netsparse

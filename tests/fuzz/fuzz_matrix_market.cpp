// libFuzzer target for the Matrix Market reader. The input is a file's bytes (plain or gzip).
// Checks, under ASan/UBSan:
//  * parse_matrix_market either returns a CsrMatrix that keeps the CsrMatrix invariants (and,
//    for a pattern file, holds only 1.0f) or throws a well-formed ParseError; any other
//    exception, a crash, a sanitizer report or an allocation beyond libFuzzer's malloc limit
//    (a header believed beyond what the bytes justify) is a bug;
//  * the same bytes read as a file (a memfd opened by path), and the same bytes gzip-compressed,
//    give the same matrix or the same error (line and reason);
//  * the header alone is refused whenever the whole read is (so the distributed reader, which
//    reads it first, cannot be made to allocate by what the whole read refuses), and
//    is_matrix_market_file agrees with a successful read;
//  * for a parsed matrix: a row block read equals that block of the whole, and the distributed
//    reader's path (header, two byte ranges cut anywhere, entry count) finds the same entries;
//    for a rejected file, that path is rejected with the same line and reason.
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "../sparse/gzip_test_util.hpp"
#include "fuzz_sparse_util.hpp"
#include "netsparse/coo.hpp"
#include "netsparse/matrix_market.hpp"
#include "sparse/input_bytes.hpp"

using namespace netsparse;
using namespace netsparse::fuzz;

namespace {

// The distributed reader's sequence (dist_matrix.cpp), split into two ranges at `cut`.
CsrMatrix read_by_ranges(const std::string& path, std::uint64_t cut_seed) {
  const MatrixMarketHeader h = read_matrix_market_header(path);
  const std::uint64_t cut = h.data_offset + cut_seed % (h.file_size - h.data_offset + 1);
  MatrixMarketChunk first = parse_matrix_market_entries(path, h, {0, cut});
  const MatrixMarketChunk second = parse_matrix_market_entries(path, h, {cut, h.file_size});
  check_matrix_market_entry_count(path, h, first.n_entries + second.n_entries);
  first.triplets.insert(first.triplets.end(), second.triplets.begin(), second.triplets.end());
  CsrMatrix m = coo_to_csr(first.triplets, h.n_rows, h.n_cols);
  if (h.field == MatrixMarketField::pattern) {
    for (double& v : m.values) v = 1.0;
  }
  return m;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // Exactly sized heap copy: a read past the end trips ASan.
  std::unique_ptr<char[]> copy(new char[size]);
  if (size != 0) std::memcpy(copy.get(), data, size);
  const std::string_view bytes(copy.get(), size);

  static MemFile file;
  file.write(data, size);
  // A header may declare up to 16.7 million rows for any file (128 MiB of row pointers, see
  // matrix_market.hpp) and every read then walks them: seconds per input in this build. Such
  // shapes are covered by the unit tests; here only their header is read.
  const auto header = run("header", [&] { return read_matrix_market_header(file.path()); });
  if (header.value && header.value->n_rows > (gidx_t{1} << 18)) return 0;

  const auto mem = run("memory", [&] { return parse_matrix_market(bytes, "fuzz.mtx"); });
  if (header.value.has_value() < mem.value.has_value()) fail("header refused, file read");
  require_same_from_file_and_gzip(
      mem, bytes, file, [](const std::string& path) { return read_matrix_market(path); },
      [](std::string_view gz, const char* name) { return parse_matrix_market(gz, name); },
      "fuzz.mtx.gz", same_matrix);
  const auto is_mm = run("detect", [&] { return is_matrix_market_file(file.path()); });
  if (mem.value) require(is_mm.value.value_or(false), "a parsed file is not detected as MM");

  const std::uint64_t seed = hash_bytes(data, size);
  if (!mem.value) {
    const auto ranges = run("ranges", [&] { return read_by_ranges(file.path(), seed); });
    require_same_outcome(mem, ranges, "whole vs ranges", same_matrix);
    return 0;
  }
  const CsrMatrix& m = *mem.value;
  check_csr(m, "whole");
  require(m.row_begin == 0 && m.n_rows == m.n_rows_global, "whole: not the whole matrix");
  const MatrixMarketHeader& h = *header.value;
  require(m.n_rows == h.n_rows && m.n_cols == h.n_cols, "shape differs from the size line");
  if (h.field == MatrixMarketField::pattern) {
    for (const double v : m.values) require(v == 1.0, "pattern value other than 1");
  }
  const gidx_t b = static_cast<gidx_t>(seed % static_cast<std::uint64_t>(m.n_rows + 1));
  const gidx_t e =
      b + static_cast<gidx_t>((seed >> 32) % static_cast<std::uint64_t>(m.n_rows - b + 1));
  const auto block = run("block", [&] { return read_matrix_market(file.path(), b, e); });
  require(block.value.has_value(), "row block failed: " + block.reason);
  check_csr(*block.value, "block");
  require(same_matrix(*block.value, row_block(m, b, e)), "row block differs from the whole");
  const auto ranges = run("ranges", [&] { return read_by_ranges(file.path(), seed >> 7); });
  require_same_outcome(mem, ranges, "whole vs ranges", same_matrix);
  return 0;
}

#include <gtest/gtest.h>
#include <omp.h>

#include <sys/resource.h>
#include <sys/stat.h>

#include <algorithm>
#include <bit>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <limits>
#include <ostream>
#include <random>
#include <stdexcept>
#include <string>
#include <vector>

#include "netsparse/matrix_market.hpp"
#include "sparse_test_util.hpp"

namespace netsparse {
namespace {

using test::BadFile;
using test::data_path;
using test::entries_of;
using test::EntryMap;
using test::expect_same_csr;
using test::expect_valid_csr;
using test::TempFile;

// ---- valid files ----------------------------------------------------------------------------

TEST(MatrixMarketRead, GeneralRealSumsDuplicatesAndKeepsExplicitZeros) {
  const CsrMatrix m = read_matrix_market(data_path("mm/general_real.mtx"));
  expect_valid_csr(m);
  EXPECT_EQ(m.n_rows_global, 4);
  EXPECT_EQ(m.n_rows, 4);
  EXPECT_EQ(m.n_cols, 5);
  const EntryMap expected = {{{0, 0}, 1.5f},  {{0, 4}, 300.0f}, {{1, 0}, 4.0f},
                             {{1, 2}, -2.0f}, {{3, 1}, -0.1f},  {{3, 4}, 0.0f}};
  EXPECT_EQ(entries_of(m), expected);
}

// Files whose check is the exact set of entries they read to (as a valid CSR matrix).
struct EntriesFile {
  const char* name;
  const char* file;
  EntryMap expected;
};
void PrintTo(const EntriesFile& c, std::ostream* os) {
  *os << c.name;
}

class MatrixMarketEntries : public ::testing::TestWithParam<EntriesFile> {};

TEST_P(MatrixMarketEntries, ReadsExactlyTheseEntries) {
  const CsrMatrix m = read_matrix_market(data_path(GetParam().file));
  expect_valid_csr(m);
  EXPECT_EQ(entries_of(m), GetParam().expected);
}

const EntriesFile kEntriesFiles[] = {
    {"SymmetricExpandsToBothTriangles",
     "mm/symmetric_real.mtx",
     {{{0, 0}, 2.0f},
      {{1, 0}, -1.0f},
      {{0, 1}, -1.0f},
      {{2, 1}, -1.5f},
      {{1, 2}, -1.5f},
      {{3, 3}, 4.0f},
      {{3, 0}, 0.5f},
      {{0, 3}, 0.5f}}},
    {"SkewSymmetricNegatesTheMirror",
     "mm/skew_real.mtx",
     {{{1, 0}, 1.25f}, {{0, 1}, -1.25f}, {{2, 0}, -2.0f}, {{0, 2}, 2.0f}}},
    {"PatternGivesOnesAndMergesRepeats",
     "mm/pattern_general.mtx",
     {{{0, 1}, 1.0f}, {{2, 2}, 1.0f}, {{1, 0}, 1.0f}}},
    {"IntegerSymmetric",
     "mm/integer_symmetric.mtx",
     {{{0, 0}, 7.0f}, {{2, 0}, -4.0f}, {{0, 2}, -4.0f}, {{2, 2}, 12.0f}}},
    {"CrlfLineEndings", "mm/crlf.mtx", {{{0, 1}, 3.5f}, {{1, 0}, -1.0f}}},
};

INSTANTIATE_TEST_SUITE_P(Files, MatrixMarketEntries, ::testing::ValuesIn(kEntriesFiles),
                         test::case_test_name<EntriesFile>);

TEST(MatrixMarketRead, CommentsBlankLinesTabsCaseAndNoFinalNewline) {
  const CsrMatrix m = read_matrix_market(data_path("mm/layout.mtx"));
  expect_valid_csr(m);
  EXPECT_EQ(m.n_rows, 3);
  EXPECT_EQ(m.n_cols, 2);
  const EntryMap expected = {{{1, 0}, 5.5f}, {{0, 1}, -3.0f}, {{2, 0}, 1e-3f}};
  EXPECT_EQ(entries_of(m), expected);
}

TEST(MatrixMarketRead, EmptyMatrix) {
  const CsrMatrix m = read_matrix_market(data_path("mm/empty_matrix.mtx"));
  expect_valid_csr(m);
  EXPECT_EQ(m.n_rows, 3);
  EXPECT_EQ(m.n_cols, 4);
  EXPECT_EQ(m.nnz(), 0);
}

TEST(MatrixMarketRead, HeaderFields) {
  const MatrixMarketHeader h = read_matrix_market_header(data_path("mm/layout.mtx"));
  EXPECT_EQ(h.field, MatrixMarketField::real);
  EXPECT_EQ(h.symmetry, MatrixMarketSymmetry::general);
  EXPECT_EQ(h.n_rows, 3);
  EXPECT_EQ(h.n_cols, 2);
  EXPECT_EQ(h.n_entries, 3);
  EXPECT_EQ(h.size_line, 5);
  const MatrixMarketHeader s = read_matrix_market_header(data_path("mm/skew_real.mtx"));
  EXPECT_EQ(s.symmetry, MatrixMarketSymmetry::skew_symmetric);
  const MatrixMarketHeader p = read_matrix_market_header(data_path("mm/pattern_general.mtx"));
  EXPECT_EQ(p.field, MatrixMarketField::pattern);
}

TEST(MatrixMarketRead, RowBlockKeepsOnlyItsRowsIncludingMirroredEntries) {
  const std::string path = data_path("mm/symmetric_real.mtx");
  const CsrMatrix whole = read_matrix_market(path);
  const CsrMatrix block = read_matrix_market(path, 1, 3);
  expect_valid_csr(block);
  EXPECT_EQ(block.row_begin, 1);
  EXPECT_EQ(block.n_rows, 2);
  EXPECT_EQ(block.n_rows_global, 4);
  expect_same_csr(block, test::row_block(whole, 1, 3));
  // Row 1's entry (1,2) exists only as the mirror of the file's (3,2).
  EXPECT_EQ(entries_of(block).count({1, 2}), 1u);
}

TEST(MatrixMarketRead, RowBlockOutsideTheMatrixThrows) {
  const std::string path = data_path("mm/symmetric_real.mtx");
  EXPECT_THROW(read_matrix_market(path, 2, 5), std::invalid_argument);
  EXPECT_THROW(read_matrix_market(path, 3, 2), std::invalid_argument);
  EXPECT_THROW(read_matrix_market(path, -1, 2), std::invalid_argument);
}

// ---- byte ranges ----------------------------------------------------------------------------

std::vector<Triplet> sorted(std::vector<Triplet> t) {
  std::sort(t.begin(), t.end(), [](const Triplet& x, const Triplet& y) {
    return std::tie(x.row, x.col, x.value) < std::tie(y.row, y.col, y.value);
  });
  return t;
}

// Any cut of the file into two ranges parses every entry exactly once.
class MatrixMarketSplit : public ::testing::TestWithParam<const char*> {};

TEST_P(MatrixMarketSplit, EveryCutParsesEachEntryOnce) {
  const std::string path = data_path(std::string("mm/") + GetParam());
  const MatrixMarketHeader h = read_matrix_market_header(path);
  const MatrixMarketChunk whole = parse_matrix_market_entries(path, h);
  EXPECT_EQ(whole.n_entries, h.n_entries);
  for (std::uint64_t cut = 0; cut <= h.file_size; ++cut) {
    const MatrixMarketChunk first = parse_matrix_market_entries(path, h, {0, cut});
    const MatrixMarketChunk second = parse_matrix_market_entries(path, h, {cut, h.file_size});
    EXPECT_EQ(first.n_entries + second.n_entries, h.n_entries) << "cut at byte " << cut;
    std::vector<Triplet> both = first.triplets;
    both.insert(both.end(), second.triplets.begin(), second.triplets.end());
    EXPECT_EQ(sorted(both), sorted(whole.triplets)) << "cut at byte " << cut;
  }
}

INSTANTIATE_TEST_SUITE_P(Fixtures, MatrixMarketSplit,
                         ::testing::Values("general_real.mtx", "symmetric_real.mtx", "layout.mtx",
                                           "crlf.mtx"),
                         test::file_test_name);

TEST(MatrixMarketRange, ErrorInARangeReportsTheFilesLineNumber) {
  const std::string path = data_path("mm/bad/crlf_error.mtx");
  const MatrixMarketHeader h = read_matrix_market_header(path);
  // Every range that holds the start of line 8 ("3 4 3", column out of range) reports line 8.
  for (std::uint64_t begin = 0; begin <= h.file_size; ++begin) {
    try {
      parse_matrix_market_entries(path, h, {begin, h.file_size});
    } catch (const ParseError& e) {
      EXPECT_EQ(e.line(), 8) << "range starting at byte " << begin;
      EXPECT_NE(e.reason().find("column index 4 is out of range [1, 3]"), std::string::npos)
          << e.what();
    }
  }
}

TEST(MatrixMarketRange, KeepRowsFilters) {
  const std::string path = data_path("mm/general_real.mtx");
  const MatrixMarketHeader h = read_matrix_market_header(path);
  MatrixMarketEntryRange range;
  range.keep_row_begin = 1;
  range.keep_row_end = 2;
  const MatrixMarketChunk c = parse_matrix_market_entries(path, h, range);
  EXPECT_EQ(c.n_entries, 7);  // all lines are still parsed and counted
  ASSERT_EQ(c.triplets.size(), 3u);
  for (const Triplet& t : c.triplets) EXPECT_EQ(t.row, 1);
}

TEST(MatrixMarketRange, EntryCountCheckPointsAtTheRightLine) {
  const std::string path = data_path("mm/general_real.mtx");
  const MatrixMarketHeader h = read_matrix_market_header(path);
  EXPECT_NO_THROW(check_matrix_market_entry_count(path, h, 7));
  try {
    check_matrix_market_entry_count(path, h, 5);
    ADD_FAILURE() << "expected a ParseError";
  } catch (const ParseError& e) {
    EXPECT_EQ(e.line(), 11);  // the last line
    EXPECT_NE(e.reason().find("file ends after 5 of the 7 entries"), std::string::npos);
  }
}

// ---- errors ---------------------------------------------------------------------------------

class MatrixMarketBadFile : public ::testing::TestWithParam<BadFile> {};

TEST_P(MatrixMarketBadFile, ThrowsParseErrorWithLineAndReason) {
  const BadFile& bad = GetParam();
  test::expect_parse_error(data_path(std::string("mm/bad/") + bad.name), bad,
                           [](const std::string& path) { read_matrix_market(path); });
}

const BadFile kBadFiles[] = {
    {"empty.mtx", 1, "empty file"},
    {"missing_banner.mtx", 1, "missing banner"},
    {"bad_banner_words.mtx", 1, "bad banner"},
    {"vector_object.mtx", 1, "unsupported object 'vector'"},
    {"array_format.mtx", 1, "unsupported format 'array'"},
    {"complex_field.mtx", 1, "unsupported field 'complex'"},
    {"hermitian.mtx", 1, "unsupported symmetry 'hermitian'"},
    {"unknown_field.mtx", 1, "unknown field 'double'"},
    {"pattern_skew.mtx", 1, "cannot be skew-symmetric"},
    {"banner_only.mtx", 4, "missing size line"},
    {"size_missing_count.mtx", 3, "missing entry count"},
    {"size_nonnumeric.mtx", 2, "column count 'x' is not a non-negative integer"},
    {"size_negative.mtx", 2, "negative row count '-3'"},
    {"size_extra.mtx", 2, "extra token '1'"},
    {"size_overflow.mtx", 2, "overflows a 64-bit integer"},
    {"symmetric_not_square.mtx", 2, "must be square, got 3 x 4"},
    {"entries_in_empty_shape.mtx", 2, "can hold none"},
    {"truncated.mtx", 6, "file ends after 3 of the 4 entries declared on line 2"},
    {"too_many.mtx", 7, "too many entries: this is entry 3"},
    {"row_zero.mtx", 4, "row index 0 is out of range [1, 3] (indices are 1-based)"},
    {"col_zero.mtx", 4, "column index 0 is out of range"},
    {"row_too_large.mtx", 4, "row index 5 is out of range [1, 4]"},
    {"col_too_large.mtx", 4, "column index 6 is out of range [1, 5]"},
    {"row_negative.mtx", 4, "negative row index '-2'"},
    {"col_nonnumeric.mtx", 4, "non-numeric column index 'b'"},
    {"row_trailing_garbage.mtx", 4, "non-numeric row index '2x'"},
    {"row_decimal.mtx", 4, "non-numeric row index '2.0'"},
    {"row_overflow.mtx", 4, "row index '99999999999999999999' overflows a 64-bit integer"},
    {"missing_column.mtx", 4, "missing column index"},
    {"missing_value.mtx", 4, "missing value (the field is real)"},
    {"extra_token.mtx", 4, "extra token '7' after the entry"},
    {"pattern_extra_value.mtx", 4, "extra token '1.0' after the entry"},
    {"value_huge.mtx", 4, "value '1e400' is out of the double range"},
    {"value_nonnumeric.mtx", 4, "non-numeric value 'abc'"},
    {"value_nan.mtx", 4, "non-numeric value 'nan'"},
    {"value_inf.mtx", 4, "non-numeric value '-inf'"},
    {"value_trailing_garbage.mtx", 4, "non-numeric value '1.5q'"},
    {"integer_fraction.mtx", 4, "value '1.5' is not an integer"},
    {"integer_overflow.mtx", 4, "overflows a 64-bit integer"},
    {"skew_diagonal.mtx", 4, "diagonal entry (2, 2) in a skew-symmetric matrix"},
    {"symmetric_upper.mtx", 4, "entry (1, 3) is above the diagonal"},
    {"crlf_error.mtx", 8, "column index 4 is out of range [1, 3]"},
    {"binary_garbage.mtx", 3, "non-numeric row index"},
    {"dims_too_large.mtx", 2,
     "the size line declares 100000000000000 rows, whose row pointers alone would take 727.6 "
     "TiB: more than a 74-byte file can justify"},
    {"huge_row_count.mtx", 2,
     "the size line declares 1000000000 rows, whose row pointers alone would take 7.5 GiB: more "
     "than a 61-byte file can justify (at most the larger of 128 MiB and 64 bytes per byte of "
     "the file"},
    {"huge_entry_count.mtx", 3,
     "the size line declares 1000000000000 entries but the 4 bytes after it can hold at most 1 "
     "(an entry line takes at least 4 bytes; truncated file?)"},
    {"truncated_gzip.mtx.gz", 0, "truncated gzip file"},
};

INSTANTIATE_TEST_SUITE_P(Fixtures, MatrixMarketBadFile, ::testing::ValuesIn(kBadFiles),
                         test::bad_file_test_name);

TEST(MatrixMarketErrors, NonexistentFile) {
  const std::string path = data_path("mm/no_such_file.mtx");
  try {
    read_matrix_market(path);
    ADD_FAILURE() << "no error";
  } catch (const ParseError& e) {
    EXPECT_EQ(e.line(), 0);
    EXPECT_NE(e.reason().find("cannot open file"), std::string::npos) << e.what();
  }
  EXPECT_THROW(read_matrix_market_header(path), ParseError);
}

TEST(MatrixMarketErrors, DirectoryIsNotAFile) {
  try {
    read_matrix_market(data_path("mm"));
    ADD_FAILURE() << "no error";
  } catch (const ParseError& e) {
    EXPECT_EQ(e.line(), 0);
    EXPECT_NE(e.reason().find("not a regular file"), std::string::npos) << e.what();
  }
}

// A FIFO nobody writes to: opening it for reading would wait for a writer forever. It must be
// refused at once, like a directory, by every reader (the header reader too), with a message
// that names the kind of file and has no ":0:" (the error is not about a line).
TEST(MatrixMarketErrors, FifoIsRefusedWithoutWaiting) {
  const TempFile f("fifo");
  ASSERT_EQ(::mkfifo(f.path().c_str(), 0600), 0);
  const auto start = std::chrono::steady_clock::now();
  for (int reader = 0; reader < 2; ++reader) {
    try {
      if (reader == 0) {
        read_matrix_market(f.path());
      } else {
        read_matrix_market_header(f.path());
      }
      ADD_FAILURE() << "no error";
    } catch (const ParseError& e) {
      EXPECT_EQ(e.line(), 0);
      EXPECT_NE(e.reason().find("not a regular file (a FIFO or pipe)"), std::string::npos)
          << e.what();
      EXPECT_EQ(std::string(e.what()), f.path() + ": " + e.reason());
    }
  }
  // Generous (CI shares two cores); a wait for a writer would never end at all.
  EXPECT_LT(std::chrono::steady_clock::now() - start, std::chrono::seconds(10));
}

TEST(MatrixMarketErrors, NulByteIsNonNumeric) {
  const TempFile f("nul", std::string("%%MatrixMarket matrix coordinate real general\n2 2 1\n1 ") +
                              std::string(1, '\0') + " 1\n");
  try {
    read_matrix_market(f.path());
    ADD_FAILURE() << "no error";
  } catch (const ParseError& e) {
    EXPECT_EQ(e.line(), 3);
    EXPECT_NE(e.reason().find("non-numeric column index"), std::string::npos) << e.what();
  }
}

// ---- sizes the file cannot justify ----------------------------------------------------------

// Peak resident memory of this process so far, in bytes.
std::int64_t peak_rss_bytes() {
  struct rusage usage {};
  getrusage(RUSAGE_SELF, &usage);
  return static_cast<std::int64_t>(usage.ru_maxrss) * 1024;
}

TEST(MatrixMarketSizes, TinyHostileHeadersFailFastWithoutAllocating) {
  // Every header here would cost gigabytes (row pointers, or entries reserved from the count)
  // if it were believed; each file is a few dozen bytes.
  const std::string banner = "%%MatrixMarket matrix coordinate real general\n";
  const struct {
    std::string text;
    const char* reason;
  } cases[] = {
      {banner + "1000000000 1 0\n", "1000000000 rows"},
      {banner + "4611686018427387903 4611686018427387903 0\n", "4611686018427387903 rows"},
      {banner + "16777216 1 0\n", "16777216 rows"},  // just above the 128 MiB floor
      {banner + "5 5 9223372036854775807\n1 1 1\n", "9223372036854775807 entries"},
      {"%%MatrixMarket matrix coordinate pattern symmetric\n1000000000 1000000000 200000000\n",
       "200000000 entries"},
  };
  const std::int64_t rss_before = peak_rss_bytes();
  const auto t0 = std::chrono::steady_clock::now();
  for (const auto& c : cases) {
    const TempFile f("hostile", c.text);
    try {
      read_matrix_market(f.path());
      ADD_FAILURE() << c.text << ": no error";
    } catch (const ParseError& e) {
      EXPECT_EQ(e.file(), f.path());
      EXPECT_NE(e.reason().find(c.reason), std::string::npos) << e.what();
    }
    // The header alone (what the distributed reader reads first) is refused the same way, and
    // so is the same text from memory.
    EXPECT_THROW(read_matrix_market_header(f.path()), ParseError) << c.text;
    EXPECT_THROW(parse_matrix_market(c.text, "hostile"), ParseError) << c.text;
  }
  const double seconds =
      std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  EXPECT_LT(seconds, 5.0);
  EXPECT_LT(peak_rss_bytes() - rss_before, std::int64_t{64} << 20);
}

TEST(MatrixMarketSizes, LegalShapesWithinTheBoundStillRead) {
  // A tall empty matrix within the floor (8 MB of row pointers), and a row of 10^18 columns:
  // columns cost no memory.
  const CsrMatrix tall = parse_matrix_market(
      "%%MatrixMarket matrix coordinate real general\n1000000 1 1\n999999 1 2.5\n", "tall");
  expect_valid_csr(tall);
  EXPECT_EQ(tall.n_rows, 1000000);
  EXPECT_EQ(entries_of(tall), (EntryMap{{{999998, 0}, 2.5f}}));
  const CsrMatrix wide = parse_matrix_market(
      "%%MatrixMarket matrix coordinate pattern general\n1 1000000000000000000 1\n"
      "1 1000000000000000000\n",
      "wide");
  expect_valid_csr(wide);
  EXPECT_EQ(wide.n_cols, 1000000000000000000);
  EXPECT_EQ(entries_of(wide), (EntryMap{{{0, 999999999999999999}, 1.0f}}));
  // The entry bound is exact: the shortest entry lines fit, one more does not.
  EXPECT_EQ(parse_matrix_market("%%MatrixMarket matrix coordinate pattern general\n2 2 3\n"
                                "1 1\n2 2\n1 2",
                                "short")
                .nnz(),
            3);
  EXPECT_THROW(parse_matrix_market("%%MatrixMarket matrix coordinate pattern general\n2 2 4\n"
                                   "1 1\n2 2\n1 2",
                                   "short"),
               ParseError);
}

// A resource limit lowers the memory budget: a row count the file justifies (within the 128
// MiB floor) but the process cannot get is refused before allocating. In a child process, so
// the limit does not outlive the test.
// GCC says __SANITIZE_*__, Clang __has_feature(*_sanitizer).
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define NETSPARSE_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define NETSPARSE_TEST_SANITIZED 1
#endif
#endif

TEST(MatrixMarketSizes, RowsBeyondTheMemoryLimitAreRefused) {
#ifdef NETSPARSE_TEST_SANITIZED
  GTEST_SKIP() << "sanitizer runtimes map more than the limit this test sets";
#else
  const TempFile f("rlimit", "%%MatrixMarket matrix coordinate real general\n12000000 1 0\n");
  EXPECT_EXIT(
      {
        struct rlimit limit {};
        getrlimit(RLIMIT_DATA, &limit);
        limit.rlim_cur = rlim_t{64} << 20;  // 64 MiB < 96 MB of row pointers
        setrlimit(RLIMIT_DATA, &limit);
        try {
          read_matrix_market(f.path());
        } catch (const ParseError& e) {
          std::fprintf(stderr, "%s\n", e.what());
          std::_Exit(e.line() == 2 && e.reason().rfind("cannot allocate the matrix", 0) == 0 ? 0
                                                                                             : 1);
        }
        std::_Exit(2);
      },
      ::testing::ExitedWithCode(0), "cannot allocate the matrix: 12000000 rows");
#endif
}

// ---- large files: the parallel path ---------------------------------------------------------

struct BigFile {
  std::string text;
  EntryMap expected;         // after summing duplicates
  std::int64_t n_lines = 0;  // lines in text
};

// ~300k entries with comment and blank lines sprinkled in: several MB, above the parallel
// threshold. Values are multiples of 1/8 so duplicate sums are exact in any order.
BigFile make_big_file(gidx_t n, std::int64_t n_entries, unsigned seed) {
  BigFile f;
  std::mt19937_64 rng(seed);
  std::uniform_int_distribution<gidx_t> index(1, n);
  std::uniform_int_distribution<int> value(-64, 64);
  f.text = "%%MatrixMarket matrix coordinate real general\n% big\n" + std::to_string(n) + " " +
           std::to_string(n) + " " + std::to_string(n_entries) + "\n";
  f.n_lines = 3;
  for (std::int64_t k = 0; k < n_entries; ++k) {
    if (k % 1000 == 17) {
      f.text += "% a comment line\n\n";
      f.n_lines += 2;
    }
    const gidx_t i = index(rng);
    const gidx_t j = index(rng);
    const float v = static_cast<float>(value(rng)) / 8.0f;
    f.text += std::to_string(i) + " " + std::to_string(j) + " " + std::to_string(v) + "\n";
    ++f.n_lines;
    f.expected[{i - 1, j - 1}] += v;
  }
  return f;
}

TEST(MatrixMarketLarge, ParallelReadMatchesReferenceForAnyThreadCount) {
  const BigFile big = make_big_file(20000, 300000, 5);
  const TempFile f("big", big.text);
  const int saved_threads = omp_get_max_threads();
  omp_set_num_threads(1);
  const CsrMatrix serial = read_matrix_market(f.path());
  omp_set_num_threads(3);
  const CsrMatrix threaded = read_matrix_market(f.path());
  const CsrMatrix block = read_matrix_market(f.path(), 4321, 12345);
  omp_set_num_threads(saved_threads);
  expect_valid_csr(serial);
  EXPECT_EQ(entries_of(serial), big.expected);
  expect_same_csr(serial, threaded);
  expect_same_csr(block, test::row_block(serial, 4321, 12345));
}

TEST(MatrixMarketLarge, ParallelErrorsReportTheFirstBadLine) {
  BigFile big = make_big_file(1000, 200000, 9);
  // Two bad lines near the end; the earlier one must be reported whatever the threads do.
  big.text += "% before the bad lines\n1 1 1\n5 1001 1\n7 7 x\n";
  const std::int64_t first_bad_line = big.n_lines + 3;
  // Fix the declared count so only the bad index is wrong (200000 + 3 entries).
  const std::string old_count = " 200000\n";
  big.text.replace(big.text.find(old_count), old_count.size(), " 200003\n");
  const TempFile f("bigbad", big.text);
  const int saved_threads = omp_get_max_threads();
  for (int threads : {1, 2, 4}) {
    omp_set_num_threads(threads);
    try {
      read_matrix_market(f.path());
      ADD_FAILURE() << "no error";
    } catch (const ParseError& e) {
      EXPECT_EQ(e.line(), first_bad_line) << threads << " threads: " << e.what();
      EXPECT_NE(e.reason().find("column index 1001 is out of range"), std::string::npos);
    }
  }
  omp_set_num_threads(saved_threads);
}

TEST(MatrixMarketLarge, TooManyEntriesFoundAcrossChunks) {
  BigFile big = make_big_file(1000, 200000, 13);
  const std::string old_count = " 200000\n";
  big.text.replace(big.text.find(old_count), old_count.size(), " 150000\n");
  const TempFile f("bigmany", big.text);
  // The 150001st entry line: count lines directly.
  std::int64_t line = 0;
  std::int64_t entries = 0;
  size_t pos = 0;
  bool header_done = false;
  while (pos < big.text.size()) {
    const size_t eol = big.text.find('\n', pos);
    ++line;
    const std::string l = big.text.substr(pos, eol - pos);
    if (!l.empty() && l[0] != '%') {
      if (!header_done) {
        header_done = true;
      } else if (++entries == 150001) {
        break;
      }
    }
    pos = eol + 1;
  }
  try {
    read_matrix_market(f.path());
    ADD_FAILURE() << "no error";
  } catch (const ParseError& e) {
    EXPECT_EQ(e.line(), line) << e.what();
    EXPECT_NE(e.reason().find("too many entries"), std::string::npos) << e.what();
  }
}

// ---- robustness: mutated files either parse or raise ParseError --------------------------

// Random edits (replace, insert, delete) with characters that matter to the grammar.
std::string mutate(const std::string& text, size_t first_mutable, std::mt19937_64& rng) {
  return test::mutate(text, first_mutable, rng, "0123456789 -+.eE%\n\r\tx", 4);
}

TEST(MatrixMarketRobustness, MutatedEntriesParseOrRaiseParseError) {
  std::mt19937_64 rng(99);
  int parsed = 0;
  int rejected = 0;
  for (const char* name : {"general_real.mtx", "symmetric_real.mtx", "skew_real.mtx",
                           "pattern_general.mtx", "integer_symmetric.mtx", "crlf.mtx"}) {
    const std::string original = test::read_file(data_path(std::string("mm/") + name));
    // Entry lines only: a mutated size line could declare a matrix too large to allocate.
    const MatrixMarketHeader h = read_matrix_market_header(data_path(std::string("mm/") + name));
    for (int trial = 0; trial < 400; ++trial) {
      test::parse_or_reject(
          "mutant", mutate(original, h.data_offset, rng),
          [](const std::string& path) { expect_valid_csr(read_matrix_market(path)); }, &parsed,
          &rejected);
    }
  }
  // Both outcomes occur, so the mutations exercise the error paths and the happy path.
  EXPECT_GT(parsed, 0);
  EXPECT_GT(rejected, 0);
}

TEST(MatrixMarketRobustness, MutatedHeadersParseOrRaiseParseError) {
  std::mt19937_64 rng(7);
  const std::string original = test::read_file(data_path("mm/layout.mtx"));
  int parsed = 0, rejected = 0;
  for (int trial = 0; trial < 1000; ++trial) {
    test::parse_or_reject(
        "mutant_header", mutate(original, 0, rng),
        [](const std::string& path) { (void)read_matrix_market_header(path); }, &parsed, &rejected);
  }
  EXPECT_GT(rejected, 0);
}

// ---- writer ---------------------------------------------------------------------------------

// m written to a file and read back: the same matrix, every value bit for bit (-0 keeps its sign).
void expect_exact_round_trip(const CsrMatrix& m, const char* file) {
  const TempFile f(file);
  write_matrix_market(f.path(), m);
  const CsrMatrix back = read_matrix_market(f.path());
  expect_same_csr(back, m);
  ASSERT_EQ(back.values.size(), m.values.size());
  for (size_t k = 0; k < m.values.size(); ++k) {
    EXPECT_EQ(std::bit_cast<std::uint64_t>(back.values[k]),
              std::bit_cast<std::uint64_t>(m.values[k]))
        << k << ": " << back.values[k] << " vs " << m.values[k];
  }
}

TEST(MatrixMarketWrite, RoundTripIsExactForAwkwardFloats) {
  CsrMatrix m;
  m.n_rows_global = m.n_rows = 3;
  m.n_cols = 4;
  m.row_ptr = {0, 4, 4, 8};
  m.col_idx = {0, 1, 2, 3, 0, 1, 2, 3};
  m.values = {1.0f / 3.0f,
              std::numeric_limits<float>::max(),
              std::numeric_limits<float>::denorm_min(),
              -std::numeric_limits<float>::min(),
              0.1f,
              -0.0f,
              16777217.0f,
              std::nextafter(1.0f, 2.0f)};
  expect_exact_round_trip(m, "roundtrip");
}

// Values are held in double (csr.hpp): digits beyond float's precision and magnitudes beyond its
// range survive reading and a write + read round trip bit for bit.
TEST(MatrixMarketWrite, RoundTripIsExactForDoubles) {
  CsrMatrix m;
  m.n_rows_global = m.n_rows = 2;
  m.n_cols = 4;
  m.row_ptr = {0, 4, 8};
  m.col_idx = {0, 1, 2, 3, 0, 1, 2, 3};
  m.values = {1.0 / 3.0,
              std::numeric_limits<double>::max(),
              std::numeric_limits<double>::denorm_min(),
              -std::numeric_limits<double>::min(),
              0.1,
              1.0 + std::numeric_limits<double>::epsilon(),
              -3.5e38,
              9007199254740993.0};
  expect_exact_round_trip(m, "roundtrip_double");
}

TEST(MatrixMarketRead, ValuesKeepDoublePrecisionAndRange) {
  // -3.5e38 is beyond float's range: read as the double it is (computing on it in fp32 is
  // refused by TiledMatrix, see the kernel tests).
  const CsrMatrix big = read_matrix_market(data_path("mm/value_above_float.mtx"));
  ASSERT_EQ(big.values.size(), 2u);
  EXPECT_EQ(big.values[1], -3.5e38);
  const TempFile f("digits",
                   "%%MatrixMarket matrix coordinate real general\n1 3 3\n"
                   "1 1 0.1\n1 2 1.2345678901234567\n1 3 1e-300\n");
  const CsrMatrix m = read_matrix_market(f.path());
  ASSERT_EQ(m.values.size(), 3u);
  EXPECT_EQ(m.values[0], 0.1);
  EXPECT_NE(m.values[0], static_cast<double>(0.1f));
  EXPECT_EQ(m.values[1], 1.2345678901234567);
  EXPECT_EQ(m.values[2], 1e-300);
}

TEST(MatrixMarketWrite, RoundTripOfRandomLargeMatrix) {
  std::mt19937_64 rng(21);
  std::uniform_real_distribution<float> real(-1e6f, 1e6f);
  std::uniform_int_distribution<gidx_t> col(0, 4999);
  std::vector<Triplet> t;
  for (gidx_t r = 0; r < 5000; ++r) {
    for (int k = 0; k < 300; ++k) t.push_back({r, col(rng), real(rng)});
  }
  const CsrMatrix m = coo_to_csr(t, 5000, 5000);
  const TempFile f("roundtrip_big");
  write_matrix_market(f.path(), m);  // > 1M nonzeros: the batched parallel writer
  expect_same_csr(read_matrix_market(f.path()), m);
}

TEST(MatrixMarketWrite, PatternAndRowBlock) {
  const CsrMatrix whole = read_matrix_market(data_path("mm/symmetric_real.mtx"));
  const CsrMatrix block = test::row_block(whole, 1, 3);
  const TempFile f("block");
  write_matrix_market(f.path(), block, /*pattern=*/true);
  const MatrixMarketHeader h = read_matrix_market_header(f.path());
  EXPECT_EQ(h.field, MatrixMarketField::pattern);
  EXPECT_EQ(h.n_rows, 4);  // the global shape
  EXPECT_EQ(h.n_entries, block.nnz());
  const CsrMatrix back = read_matrix_market(f.path(), 1, 3);
  EXPECT_EQ(back.col_idx, block.col_idx);
  EXPECT_EQ(back.row_ptr, block.row_ptr);
  for (float v : back.values) EXPECT_EQ(v, 1.0f);
  // Rows outside the block were not written.
  EXPECT_EQ(read_matrix_market(f.path(), 0, 1).nnz(), 0);
}

TEST(MatrixMarketWrite, Errors) {
  CsrMatrix m;
  m.n_rows_global = m.n_rows = 1;
  m.n_cols = 1;
  m.row_ptr = {0, 1};
  m.col_idx = {0};
  m.values = {1.0f};
  EXPECT_THROW(write_matrix_market("/nonexistent-dir/x.mtx", m), std::runtime_error);
  const TempFile f("bad");
  CsrMatrix bad_col = m;
  bad_col.col_idx = {1};
  EXPECT_THROW(write_matrix_market(f.path(), bad_col), std::invalid_argument);
  CsrMatrix bad_ptr = m;
  bad_ptr.row_ptr = {0};
  EXPECT_THROW(write_matrix_market(f.path(), bad_ptr), std::invalid_argument);
}

}  // namespace
}  // namespace netsparse

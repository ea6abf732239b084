// Helpers shared by the sparse component's tests.
#pragma once

#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <ostream>
#include <random>
#include <string>
#include <string_view>
#include <utility>

#include "csr_blocks.hpp"
#include "csr_checks.hpp"
#include "netsparse/csr.hpp"
#include "netsparse/sparse_error.hpp"

namespace netsparse::test {

inline std::string data_path(const std::string& relative) {
  return std::string(NETSPARSE_TEST_DATA_DIR) + "/" + relative;
}

// A file in the temp directory removed when the object dies.
class TempFile {
 public:
  explicit TempFile(const std::string& stem) {
    static int counter = 0;
    path_ =
        (std::filesystem::temp_directory_path() /
         ("netsparse_" + stem + "_" + std::to_string(::getpid()) + "_" + std::to_string(counter++)))
            .string();
  }
  TempFile(const std::string& stem, const std::string& content) : TempFile(stem) {
    std::ofstream(path_, std::ios::binary) << content;
  }
  ~TempFile() { std::remove(path_.c_str()); }
  TempFile(const TempFile&) = delete;
  TempFile& operator=(const TempFile&) = delete;
  [[nodiscard]] const std::string& path() const { return path_; }

 private:
  std::string path_;
};

using EntryMap = std::map<std::pair<gidx_t, gidx_t>, float>;

// The matrix's nonzeros keyed by (global row, column).
inline EntryMap entries_of(const CsrMatrix& m) {
  EntryMap out;
  for (gidx_t r = 0; r < m.n_rows; ++r) {
    for (std::int64_t k = m.row_ptr[r]; k < m.row_ptr[r + 1]; ++k) {
      out[{m.row_begin + r, m.col_idx[k]}] = m.values[k];
    }
  }
  return out;
}

// The CsrMatrix invariants (csr.hpp): sizes, row_ptr monotone from 0, columns in range and
// strictly increasing within each row.
inline void expect_valid_csr(const CsrMatrix& m) {
  ASSERT_EQ(m.row_ptr.size(), static_cast<size_t>(m.n_rows) + 1);
  ASSERT_EQ(m.row_ptr[0], 0);
  ASSERT_EQ(m.col_idx.size(), static_cast<size_t>(m.nnz()));
  ASSERT_EQ(m.values.size(), static_cast<size_t>(m.nnz()));
  ASSERT_GE(m.row_begin, 0);
  ASSERT_LE(m.row_begin + m.n_rows, m.n_rows_global);
  for (gidx_t r = 0; r < m.n_rows; ++r) {
    ASSERT_LE(m.row_ptr[r], m.row_ptr[r + 1]) << "row " << r;
    for (std::int64_t k = m.row_ptr[r]; k < m.row_ptr[r + 1]; ++k) {
      ASSERT_GE(m.col_idx[k], 0);
      ASSERT_LT(m.col_idx[k], m.n_cols);
      if (k > m.row_ptr[r]) {
        ASSERT_LT(m.col_idx[k - 1], m.col_idx[k]) << "row " << r;
      }
    }
  }
}

// A malformed input file of tests/data and the error it must raise.
struct BadFile {
  const char* name;
  std::int64_t line;   // 0: the file as a whole
  const char* reason;  // a substring of the expected reason
};

// Names the case in test listings instead of dumping its bytes.
inline void PrintTo(const BadFile& bad, std::ostream* os) {
  *os << bad.name;
}

// gtest's name for a case of a table-driven test: the case's `name`.
template <class Case>
std::string case_test_name(const ::testing::TestParamInfo<Case>& info) {
  return info.param.name;
}

// gtest's name for a case about one file: the file's name up to its first dot.
inline std::string file_test_name(const ::testing::TestParamInfo<const char*>& info) {
  const std::string name = info.param;
  return name.substr(0, name.find('.'));
}
inline std::string bad_file_test_name(const ::testing::TestParamInfo<BadFile>& info) {
  const std::string name = info.param.name;
  return name.substr(0, name.find('.'));
}

// read(path) must throw a ParseError naming the file, the line and the reason; what() is
// "FILE:LINE: reason", without ":0:" for an error about the file as a whole.
template <class Read>
void expect_parse_error(const std::string& path, const BadFile& bad, Read&& read) {
  try {
    read(path);
    ADD_FAILURE() << bad.name << ": no error";
  } catch (const ParseError& e) {
    EXPECT_EQ(e.file(), path);
    EXPECT_EQ(e.line(), bad.line) << e.what();
    EXPECT_NE(e.reason().find(bad.reason), std::string::npos) << e.what();
    const std::string prefix =
        bad.line > 0 ? path + ":" + std::to_string(bad.line) + ": " : path + ": ";
    EXPECT_EQ(std::string(e.what()).rfind(prefix, 0), 0u) << e.what();
  }
}

// The bytes of a file (empty if it cannot be read).
inline std::string read_file(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  return std::string(std::istreambuf_iterator<char>(in), {});
}

// `text` after 1 to max_edits random edits at or after first_mutable (a character replaced,
// inserted or erased; new characters from `alphabet`, the ones that matter to the grammar).
inline std::string mutate(std::string text, std::size_t first_mutable, std::mt19937_64& rng,
                          std::string_view alphabet, int max_edits) {
  std::uniform_int_distribution<int> kind(0, 2);
  std::uniform_int_distribution<std::size_t> pick(0, alphabet.size() - 1);
  const int edits = max_edits == 1 ? 1 : std::uniform_int_distribution<int>(1, max_edits)(rng);
  for (int e = edits; e > 0 && text.size() > first_mutable; --e) {
    std::uniform_int_distribution<std::size_t> where(first_mutable, text.size() - 1);
    const std::size_t at = where(rng);
    switch (kind(rng)) {
      case 0:
        text[at] = alphabet[pick(rng)];
        break;
      case 1:
        text.insert(at, 1, alphabet[pick(rng)]);
        break;
      default:
        text.erase(at, 1);
        break;
    }
  }
  return text;
}

// A mutated file either parses (parse(path) returns; it checks what it read) or raises a
// ParseError with a line >= 1; counts which in *parsed / *rejected.
template <class Parse>
void parse_or_reject(const std::string& stem, const std::string& text, Parse&& parse, int* parsed,
                     int* rejected) {
  const TempFile f(stem, text);
  try {
    parse(f.path());
    ++*parsed;
  } catch (const ParseError& e) {
    EXPECT_GE(e.line(), 1) << e.what();
    ++*rejected;
  }
}

}  // namespace netsparse::test

// The real matrices scripts/fetch-matrices.sh fetches, parsed by our readers and checked
// against an independent (slow, iostream-based) reference reader and the published sizes.
// Usage: sparse_real_matrices_test CACHE_DIR. A missing file is a failure, not a skip.
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <sstream>
#include <string>

#include "gzip_test_util.hpp"
#include "netsparse/matrix_market.hpp"
#include "netsparse/metis.hpp"
#include "sparse_test_util.hpp"

namespace netsparse {
namespace {

std::string g_dir;

std::string cached(const std::string& name) {
  const std::string path = g_dir + "/" + name;
  if (!std::filesystem::exists(path)) {
    ADD_FAILURE() << path << " is missing: run scripts/fetch-matrices.sh " << g_dir;
  }
  return path;
}

struct Reference {
  gidx_t rows = 0;
  gidx_t cols = 0;
  test::EntryMap entries;
};

// A deliberately simple reader: getline + istringstream, symmetric expansion, pattern = 1.
Reference reference_read(const std::string& path) {
  std::ifstream in(path);
  std::string line;
  std::getline(in, line);
  const bool pattern = line.find("pattern") != std::string::npos;
  const bool symmetric = line.find("symmetric") != std::string::npos;
  Reference ref;
  std::int64_t declared = -1;
  std::int64_t seen = 0;
  while (std::getline(in, line)) {
    if (line.empty() || line[0] == '%') continue;
    std::istringstream fields(line);
    if (declared < 0) {
      fields >> ref.rows >> ref.cols >> declared;
      continue;
    }
    gidx_t i = 0;
    gidx_t j = 0;
    double v = 1.0;
    fields >> i >> j;
    if (!pattern) fields >> v;
    ++seen;
    if (pattern) {
      ref.entries[{i - 1, j - 1}] = 1.0f;
      if (symmetric) ref.entries[{j - 1, i - 1}] = 1.0f;
    } else {
      ref.entries[{i - 1, j - 1}] += static_cast<float>(v);
      if (symmetric && i != j) ref.entries[{j - 1, i - 1}] += static_cast<float>(v);
    }
  }
  EXPECT_EQ(seen, declared) << path;
  return ref;
}

class RealMatrixMarket : public ::testing::TestWithParam<const char*> {};

TEST_P(RealMatrixMarket, MatchesTheReferenceReader) {
  const std::string path = cached(GetParam());
  const CsrMatrix m = read_matrix_market(path);
  test::expect_valid_csr(m);
  const Reference ref = reference_read(path);
  EXPECT_EQ(m.n_rows, ref.rows);
  EXPECT_EQ(m.n_cols, ref.cols);
  EXPECT_EQ(test::entries_of(m), ref.entries);
}

INSTANTIATE_TEST_SUITE_P(Mongoose, RealMatrixMarket,
                         ::testing::Values("bcspwr01.mtx", "bcspwr02.mtx", "bcspwr03.mtx",
                                           "bcspwr04.mtx", "bcspwr05.mtx", "bcspwr06.mtx",
                                           "bcspwr07.mtx", "bcspwr08.mtx", "bcspwr09.mtx",
                                           "bcspwr10.mtx", "dwt_992.mtx", "jagmesh7.mtx", "G51.mtx",
                                           "Erdos971.mtx", "GD97_b.mtx", "Pd.mtx",
                                           "NotreDame_www.mtx"),
                         test::file_test_name);

TEST(RealMatrices, NotreDameSizesRowBlocksAndRoundTrip) {
  const std::string path = cached("NotreDame_www.mtx");
  const CsrMatrix m = read_matrix_market(path);
  // docs/data-facts.md: 325,729 rows, 929,849 nonzeros.
  EXPECT_EQ(m.n_rows, 325729);
  EXPECT_EQ(m.nnz(), 929849);
  const CsrMatrix block = read_matrix_market(path, 100000, 200000);
  test::expect_same_csr(block, test::row_block(m, 100000, 200000));
  const test::TempFile copy("notredame");
  write_matrix_market(copy.path(), m, /*pattern=*/true);
  test::expect_same_csr(read_matrix_market(copy.path()), m);
}

TEST(RealMatrices, MetisGraphsHaveTheirPublishedSizes) {
  // docs/data-facts.md: mdual 258,569 rows and 1,026,264 nonzeros; copter2 55,476 and 704,476.
  const MetisGraph mdual = read_metis_graph(cached("mdual.graph"));
  test::expect_valid_csr(mdual.adjacency);
  EXPECT_EQ(mdual.adjacency.n_rows, 258569);
  EXPECT_EQ(mdual.adjacency.nnz(), 1026264);
  const MetisGraph copter2 = read_metis_graph(cached("copter2.graph"));
  test::expect_valid_csr(copter2.adjacency);
  EXPECT_EQ(copter2.adjacency.n_rows, 55476);
  EXPECT_EQ(copter2.adjacency.nnz(), 704476);
}

// The real files gzip-compressed (in memory, then as a temporary file): the growing
// decompression buffer on megabytes of content, read exactly as the plain files.
TEST(RealMatrices, GzipCompressedReadAsThePlainFiles) {
  const std::string mtx = cached("NotreDame_www.mtx");
  const test::TempFile mtx_gz("notredame_gz", test::gzip_bytes(test::read_file(mtx), 6));
  test::expect_same_csr(read_matrix_market(mtx_gz.path()), read_matrix_market(mtx));
  EXPECT_TRUE(is_matrix_market_file(mtx_gz.path()));
  for (const char* name : {"mdual.graph", "copter2.graph"}) {
    const std::string graph = cached(name);
    const test::TempFile graph_gz("graph_gz", test::gzip_bytes(test::read_file(graph), 6));
    EXPECT_FALSE(is_matrix_market_file(graph_gz.path())) << name;
    const MetisGraph plain = read_metis_graph(graph);
    const MetisGraph unzipped = read_metis_graph(graph_gz.path());
    test::expect_same_csr(unzipped.adjacency, plain.adjacency);
    EXPECT_EQ(unzipped.vertex_weights, plain.vertex_weights) << name;
  }
}

}  // namespace
}  // namespace netsparse

int main(int argc, char** argv) {
  ::testing::InitGoogleTest(&argc, argv);
  if (argc != 2) {
    std::cerr << "usage: " << argv[0] << " MATRIX_DIR (filled by scripts/fetch-matrices.sh)\n";
    return 2;
  }
  netsparse::g_dir = argv[1];
  return RUN_ALL_TESTS();
}

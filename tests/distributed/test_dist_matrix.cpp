// Building distributed matrices: the distributed Matrix Market reader equals the serial reader
// block by block (both partitions), errors reach every rank, generators and METIS files,
// specification strings, and neighbour sampling independent of the partition.
#include <gtest/gtest.h>
#include <mpi.h>
#include <unistd.h>

#include <algorithm>
#include <filesystem>
#include <fstream>
#include <optional>
#include <string>
#include <vector>

#include "dist_test_util.hpp"
#include "netsparse/dist_matrix.hpp"
#include "netsparse/distributed.hpp"
#include "netsparse/generators.hpp"
#include "netsparse/matrix_market.hpp"
#include "netsparse/metis.hpp"

namespace netsparse {
namespace {

// The distributed tests' helpers (dist_test_util.hpp).
using namespace test;

RowPartition expected_partition(const CsrMatrix& whole, PartitionKind kind, int p) {
  return kind == PartitionKind::balanced_nnz ? RowPartition::balanced_by_nnz(whole, p)
                                             : RowPartition::equal_blocks(whole.n_rows, p);
}

void expect_matches_whole(const DistMatrix& dm, const CsrMatrix& whole, PartitionKind kind,
                          const std::string& what) {
  const int p = world_size(), r = world_rank();
  const RowPartition rows = expected_partition(whole, kind, p);
  EXPECT_EQ(dm.rows().offsets(), rows.offsets()) << what;
  const RowPartition cols =
      whole.n_rows_global == whole.n_cols ? rows : RowPartition::equal_blocks(whole.n_cols, p);
  EXPECT_EQ(dm.cols().offsets(), cols.offsets()) << what;
  EXPECT_EQ(dm.nnz_global(), whole.nnz()) << what;
  EXPECT_EQ(dm.n_rows(), whole.n_rows_global) << what;
  EXPECT_EQ(dm.n_cols(), whole.n_cols) << what;
  expect_same_csr(dm.local(), row_block(whole, rows.begin(r), rows.end(r)), what);
}

const PartitionKind kKinds[] = {PartitionKind::equal_rows, PartitionKind::balanced_nnz};

TEST(DistMatrix, MatrixMarketEqualsSerialReader) {
  const char* files[] = {"mm/general_real.mtx",
                         "mm/symmetric_real.mtx",
                         "mm/integer_symmetric.mtx",
                         "mm/skew_real.mtx",
                         "mm/pattern_general.mtx",
                         "mm/crlf.mtx",
                         "mm/layout.mtx",
                         "mm/empty_matrix.mtx",
                         "distributed/small_symmetric.mtx",
                         "distributed/rect_general.mtx",
                         "distributed/pattern_square.mtx"};
  for (const char* f : files) {
    const std::string path = data_path(f);
    const CsrMatrix whole = read_matrix_market(path);
    for (PartitionKind kind : kKinds) {
      const DistMatrix dm = read_distributed_matrix_market(MPI_COMM_WORLD, path, kind);
      expect_matches_whole(dm, whole, kind, std::string(f) + " " + to_string(kind));
      EXPECT_EQ(dm.name(), std::filesystem::path(f).filename().string());
    }
  }
}

TEST(DistMatrix, MalformedFilesFailOnEveryRankWithTheSerialMessage) {
  std::vector<std::string> bad;
  for (const auto& e : std::filesystem::directory_iterator(data_path("mm/bad"))) {
    bad.push_back(e.path().string());
  }
  std::sort(bad.begin(), bad.end());
  ASSERT_FALSE(bad.empty());
  bad.push_back(data_path("mm/does_not_exist.mtx"));
  for (const std::string& path : bad) {
    std::optional<ParseError> serial;
    try {
      (void)read_matrix_market(path);
    } catch (const ParseError& e) {
      serial = e;
    }
    ASSERT_TRUE(serial.has_value()) << path << " should be rejected by the serial reader";
    bool threw = false;
    try {
      (void)read_distributed_matrix_market(MPI_COMM_WORLD, path);
    } catch (const ParseError& e) {
      threw = true;
      EXPECT_EQ(e.file(), serial->file()) << path;
      EXPECT_EQ(e.line(), serial->line()) << path;
      // Same reason, except that a rank cannot allocate its own share of the rows (which the
      // message counts) where the serial reader cannot allocate all of them.
      const std::string prefix = "cannot allocate the matrix";
      if (serial->reason().rfind(prefix, 0) == 0) {
        EXPECT_EQ(e.reason().rfind(prefix, 0), 0u) << e.what();
      } else {
        EXPECT_EQ(e.reason(), serial->reason()) << path;
      }
    }
    EXPECT_TRUE(threw) << path;
  }
}

// Ranks given different files (issue 21.3): refused before parsing, on every rank, naming the
// first rank whose input differs and its file, not a ":0:" error about a valid file.
TEST(DistMatrix, DifferentInputsPerRankAreNamed) {
  const int r = world_rank(), p = world_size();
  const std::string path = (std::filesystem::temp_directory_path() /
                            ("netsparse_rank_input_" + std::to_string(::getpid()) + ".mtx"))
                               .string();
  {  // rank 0: 3 entries; the others: 4 (a different size and header)
    std::ofstream out(path);
    out << "%%MatrixMarket matrix coordinate real general\n3 3 " << (r == 0 ? 3 : 4) << "\n"
        << "1 1 1\n2 2 2\n3 3 3\n"
        << (r == 0 ? "" : "1 3 4\n");
  }
  const std::string metis = path + ".graph";
  {  // a triangle on rank 0, a path on the others
    std::ofstream out(metis);
    out << (r == 0 ? "3 3\n2 3\n1 3\n1 2\n" : "3 2\n2\n1 3\n2\n");
  }
  for (const std::string& file : {path, metis}) {
    if (p == 1) {  // one rank: nothing to disagree with, the file is read
      EXPECT_NO_THROW((void)load_distributed_matrix(MPI_COMM_WORLD, file)) << file;
      continue;
    }
    try {
      (void)load_distributed_matrix(MPI_COMM_WORLD, file);
      ADD_FAILURE() << file << ": different inputs accepted";
    } catch (const ParseError& e) {
      EXPECT_EQ(e.line(), 0) << e.what();
      EXPECT_NE(e.reason().find("rank 1's input differs from rank 0's"), std::string::npos)
          << e.what();
      EXPECT_EQ(std::string(e.what()).find(":0:"), std::string::npos) << e.what();
      // Every rank names rank 1's file (each rank wrote its own, named by its pid).
      if (r == 1) {
        EXPECT_EQ(e.file(), file);
      }
      EXPECT_NE(e.file().find("netsparse_rank_input_"), std::string::npos) << e.what();
    }
  }
  std::remove(metis.c_str());
  std::remove(path.c_str());
}

TEST(DistMatrix, GeneratorsEqualSerialGeneration) {
  KroneckerParams kron;
  kron.scale = 7;
  kron.seed = 5;
  StencilParams stencil{5, 4, 3, 2};
  RoadParams road;
  road.width = 13;
  road.height = 11;
  road.long_edge_fraction = 0.2;
  const gidx_t nk = gidx_t{1} << kron.scale;
  const CsrMatrix whole_kron = generate_kronecker(kron, 0, nk);
  const CsrMatrix whole_stencil = generate_stencil27(stencil, 0, 5 * 4 * 3 * 2);
  const CsrMatrix whole_road = generate_road(road, 0, 13 * 11);
  for (PartitionKind kind : kKinds) {
    expect_matches_whole(generate_distributed(MPI_COMM_WORLD, kron, kind), whole_kron, kind,
                         "kron");
    expect_matches_whole(generate_distributed(MPI_COMM_WORLD, stencil, kind), whole_stencil, kind,
                         "stencil");
    expect_matches_whole(generate_distributed(MPI_COMM_WORLD, road, kind), whole_road, kind,
                         "road");
  }
}

TEST(DistMatrix, MetisEqualsSerialReader) {
  for (const char* f : {"metis/plain.graph", "metis/edge_weights.graph", "metis/crlf.graph"}) {
    const CsrMatrix whole = read_metis_graph(data_path(f)).adjacency;
    for (PartitionKind kind : kKinds) {
      expect_matches_whole(read_distributed_metis(MPI_COMM_WORLD, data_path(f), kind), whole, kind,
                           f);
    }
  }
}

TEST(DistMatrix, SpecificationStrings) {
  KroneckerParams kron;
  kron.scale = 6;
  const CsrMatrix whole_kron = generate_kronecker(kron, 0, 64);
  expect_matches_whole(load_distributed_matrix(MPI_COMM_WORLD, "gen:kron:6"), whole_kron,
                       PartitionKind::equal_rows, "gen:kron:6");
  kron.edge_factor = 4;
  kron.seed = 9;
  expect_matches_whole(load_distributed_matrix(MPI_COMM_WORLD, "gen:kron:6:4:9"),
                       generate_kronecker(kron, 0, 64), PartitionKind::equal_rows,
                       "gen:kron:6:4:9");
  expect_matches_whole(load_distributed_matrix(MPI_COMM_WORLD, "gen:stencil:3:4:5:2"),
                       generate_stencil27({3, 4, 5, 2}, 0, 120), PartitionKind::equal_rows,
                       "stencil");
  RoadParams road;
  road.width = 9;
  road.height = 7;
  road.long_edge_fraction = 0.5;
  road.seed = 3;
  expect_matches_whole(load_distributed_matrix(MPI_COMM_WORLD, "gen:road:9:7:0.5:3"),
                       generate_road(road, 0, 63), PartitionKind::equal_rows, "road");
  road.grid_edge_fraction = 0.5;
  expect_matches_whole(load_distributed_matrix(MPI_COMM_WORLD, "gen:road:9:7:0.5:3:0.5"),
                       generate_road(road, 0, 63), PartitionKind::equal_rows, "road, thinned");
  WebParams web;
  web.n = 500;
  web.mean_degree = 6;
  web.local_fraction = 0.7;
  web.seed = 4;
  expect_matches_whole(load_distributed_matrix(MPI_COMM_WORLD, "gen:web:500:6:0.7:4"),
                       generate_web(web, 0, 500), PartitionKind::equal_rows, "web");
  const std::string mtx = data_path("distributed/small_symmetric.mtx");
  expect_matches_whole(load_distributed_matrix(MPI_COMM_WORLD, mtx), read_matrix_market(mtx),
                       PartitionKind::equal_rows, "file");
  const std::string graph = data_path("metis/plain.graph");
  expect_matches_whole(load_distributed_matrix(MPI_COMM_WORLD, graph),
                       read_metis_graph(graph).adjacency, PartitionKind::equal_rows, "graph");

  // gzip-compressed files (x.mtx.gz, x.graph.gz): the format is decided on the decompressed
  // content, and both readers decompress transparently.
  const std::string mtx_gz = data_path("mm/gzip/general_real.mtx.gz");
  expect_matches_whole(load_distributed_matrix(MPI_COMM_WORLD, mtx_gz),
                       read_matrix_market(data_path("mm/general_real.mtx")),
                       PartitionKind::equal_rows, "mtx.gz");
  const std::string graph_gz = data_path("metis/gzip/wild_fmt10_ncon3_fifth_token.graph.gz");
  expect_matches_whole(
      load_distributed_matrix(MPI_COMM_WORLD, graph_gz, PartitionKind::balanced_nnz),
      read_metis_graph(data_path("metis/wild_fmt10_ncon3_fifth_token.graph")).adjacency,
      PartitionKind::balanced_nnz, "graph.gz");

  // A Matrix Market file without the .mtx extension is recognized by its banner.
  std::string copy = "/tmp/netsparse_dist_spec_" + std::to_string(getpid()) + ".dat";
  int len = static_cast<int>(copy.size());
  MPI_Bcast(&len, 1, MPI_INT, 0, MPI_COMM_WORLD);
  copy.resize(static_cast<std::size_t>(len));
  MPI_Bcast(copy.data(), len, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (world_rank() == 0) std::filesystem::copy_file(mtx, copy);
  MPI_Barrier(MPI_COMM_WORLD);
  expect_matches_whole(load_distributed_matrix(MPI_COMM_WORLD, copy), read_matrix_market(mtx),
                       PartitionKind::equal_rows, "banner");
  MPI_Barrier(MPI_COMM_WORLD);
  if (world_rank() == 0) std::filesystem::remove(copy);

  for (const char* spec :
       {"gen:kron", "gen:kron:x", "gen:kron:41", "gen:kron:8:0", "gen:kron:8:16:1:2", "gen:foo:3",
        "gen:stencil:1:2", "gen:stencil:0:2:2", "gen:road:0:5", "gen:road:4:4:1.5",
        "gen:road:4:4:0.1:1:2", "gen:web:0", "gen:web:100:0.5", "gen:web:100:8:1.5", ""}) {
    EXPECT_THROW((void)load_distributed_matrix(MPI_COMM_WORLD, spec), std::invalid_argument)
        << "'" << spec << "'";
  }
  EXPECT_THROW((void)load_distributed_matrix(MPI_COMM_WORLD, "/nonexistent/file.xyz"), ParseError);
}

TEST(DistMatrix, SamplingDoesNotDependOnThePartition) {
  KroneckerParams kron;
  kron.scale = 8;
  const CsrMatrix whole = generate_kronecker(kron, 0, 256);
  const DistMatrix dm = generate_distributed(MPI_COMM_WORLD, kron);
  const RowPartition& rows = dm.rows();
  const int r = world_rank();
  for (const SamplingParams params : {SamplingParams{0.5, 0}, SamplingParams{0.8, 3},
                                      SamplingParams{1.0, 0}, SamplingParams{0.0, 0}}) {
    for (std::uint64_t seed : {1u, 2u}) {
      const CsrMatrix whole_sample = sample_rows(whole, params, seed);
      expect_same_csr(sample_rows(dm.local(), params, seed),
                      row_block(whole_sample, rows.begin(r), rows.end(r)), "sample");
      if (params.max_per_row > 0) {
        for (gidx_t row = 0; row < whole_sample.n_rows; ++row) {
          EXPECT_LE(whole_sample.row_ptr[row + 1] - whole_sample.row_ptr[row], params.max_per_row);
        }
      }
      if (params.keep_fraction == 1.0) {
        EXPECT_EQ(whole_sample.col_idx, whole.col_idx);
      }
      if (params.keep_fraction == 0.0) {
        EXPECT_EQ(whole_sample.nnz(), 0);
      }
      if (params.keep_fraction == 0.5 && params.max_per_row == 0) {
        // A fair hash keeps about half of several thousand nonzeros.
        EXPECT_GT(whole_sample.nnz(), whole.nnz() * 4 / 10);
        EXPECT_LT(whole_sample.nnz(), whole.nnz() * 6 / 10);
      }
    }
  }
  // Different seeds give different samples (the point of changing sparsity).
  EXPECT_NE(sample_rows(whole, {0.5, 0}, 1).col_idx, sample_rows(whole, {0.5, 0}, 2).col_idx);
  EXPECT_THROW((void)sample_rows(whole, {1.5, 0}, 1), std::invalid_argument);
  EXPECT_THROW((void)sample_rows(whole, {0.5, -1}, 1), std::invalid_argument);
}

TEST(DistMatrix, ConstructorChecksTheLocalBlock) {
  const int p = world_size();
  const RowPartition rows = RowPartition::equal_blocks(10, p);
  CsrMatrix wrong;  // claims to be the whole matrix on every rank
  wrong.n_rows_global = 10;
  wrong.n_cols = 10;
  wrong.row_begin = 0;
  wrong.n_rows = 10;
  wrong.row_ptr.assign(11, 0);
  if (p > 1) {
    EXPECT_THROW(DistMatrix(MPI_COMM_WORLD, wrong, rows, rows, "x"), std::invalid_argument);
  }
  wrong.n_cols = 11;  // shape differs from the column partition
  EXPECT_THROW(DistMatrix(MPI_COMM_WORLD, wrong, rows, rows, "x"), std::invalid_argument);
}

// A column outside [0, n_cols) or a row's columns out of order on ONE rank: every rank refuses
// the DistMatrix with that rank's message (a column past n_cols had been a heap write outside
// the ghosts' bitmap in the kernel's setup), and a kernel refuses such rows in set_pattern
// the same way (checked in its split of the rows).
TEST(DistMatrix, ColumnsOutOfRangeOrOrderAreRefusedOnEveryRank) {
  const int p = world_size(), r = world_rank();
  const gidx_t n = 8 * p;
  const RowPartition rows = RowPartition::equal_blocks(n, p);
  const auto block = [&](gidx_t bad_col, bool swap) {
    CsrMatrix a;
    a.n_rows_global = n;
    a.n_cols = n;
    a.row_begin = rows.begin(r);
    a.n_rows = rows.size(r);
    a.row_ptr.push_back(0);
    for (gidx_t i = 0; i < a.n_rows; ++i) {
      const gidx_t row = a.row_begin + i;
      a.col_idx.push_back(std::min(row, (row + 1) % n));
      a.col_idx.push_back(std::max(row, (row + 1) % n));
      if (r == p - 1 && i == 2) {
        if (bad_col != 0) a.col_idx.back() = bad_col;
        if (swap) std::swap(a.col_idx[a.col_idx.size() - 2], a.col_idx.back());
      }
      a.values.insert(a.values.end(), {1.0, 2.0});
      a.row_ptr.push_back(static_cast<std::int64_t>(a.col_idx.size()));
    }
    return a;
  };
  const std::string who = "DistMatrix (rank " + std::to_string(p - 1) + "): ";
  const std::string where =
      "local row 2 (global row " + std::to_string(rows.begin(p - 1) + 2) + ")";
  for (const gidx_t bad : {n + 1000000, gidx_t{-3}}) {
    const std::string msg = invalid_argument_message(
        [&] { DistMatrix(MPI_COMM_WORLD, block(bad, false), rows, rows, "bad"); });
    const std::string want = who + "column " + std::to_string(bad) + " at " + where +
                             " is outside [0, " + std::to_string(n) + ")";
    EXPECT_NE(msg.find(want), std::string::npos) << msg;
    EXPECT_TRUE(all_ranks(msg.find(want) != std::string::npos));
  }
  const std::string unsorted = invalid_argument_message(
      [&] { DistMatrix(MPI_COMM_WORLD, block(0, true), rows, rows, "bad"); });
  EXPECT_NE(unsorted.find(who + "columns of " + where + " are not sorted and unique"),
            std::string::npos)
      << unsorted;
  // The good block builds, and a kernel on it refuses bad rows in set_pattern on every rank.
  DistMatrix good(MPI_COMM_WORLD, block(0, false), rows, rows, "good");
  for (const CommMode m : {CommMode::netsparse, CommMode::inspector_executor}) {
    DistOptions o;
    o.mode = m;
    DistKernel k(good, KernelKind::spmm, 2, o);
    const CsrMatrix bad = block(n + 5, false);
    const std::string msg = invalid_argument_message([&] { k.set_pattern(bad); });
    const bool named = msg.find("DistKernel (rank " + std::to_string(p - 1) + "): column " +
                                std::to_string(n + 5)) != std::string::npos;
    EXPECT_TRUE(named) << msg;
    EXPECT_TRUE(all_ranks(named)) << to_string(m);
  }
}

}  // namespace
}  // namespace netsparse

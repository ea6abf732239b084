#include <gtest/gtest.h>

#include <ostream>
#include <random>
#include <string>
#include <vector>

#include "netsparse/metis.hpp"
#include "sparse_test_util.hpp"

namespace netsparse {
namespace {

using test::data_path;
using test::entries_of;
using test::EntryMap;
using test::expect_valid_csr;

TEST(MetisRead, PlainGraphWithCommentsAndAnIsolatedVertex) {
  const MetisGraph g = read_metis_graph(data_path("metis/plain.graph"));
  expect_valid_csr(g.adjacency);
  EXPECT_EQ(g.adjacency.n_rows, 5);
  EXPECT_EQ(g.adjacency.n_cols, 5);
  EXPECT_EQ(g.adjacency.nnz(), 8);
  const EntryMap expected = {{{0, 1}, 1.0f}, {{0, 2}, 1.0f}, {{1, 0}, 1.0f}, {{1, 2}, 1.0f},
                             {{2, 0}, 1.0f}, {{2, 1}, 1.0f}, {{2, 3}, 1.0f}, {{3, 2}, 1.0f}};
  EXPECT_EQ(entries_of(g.adjacency), expected);
  EXPECT_EQ(g.ncon, 0);
  EXPECT_TRUE(g.vertex_weights.empty());
  EXPECT_TRUE(g.vertex_sizes.empty());
}

// Files whose check is everything they read to: the graph's vertices and entries (as a valid CSR
// matrix), its number of vertex weights, the weights and the vertex sizes.
struct GraphFile {
  const char* name;
  const char* file;
  gidx_t vertices;
  int ncon;
  std::vector<std::int64_t> vertex_weights, vertex_sizes;
  EntryMap expected;
};
void PrintTo(const GraphFile& c, std::ostream* os) {
  *os << c.name;
}

class MetisFile : public ::testing::TestWithParam<GraphFile> {};

TEST_P(MetisFile, ReadsExactlyThisGraph) {
  const GraphFile& c = GetParam();
  const MetisGraph g = read_metis_graph(data_path(c.file));
  expect_valid_csr(g.adjacency);
  EXPECT_EQ(g.adjacency.n_rows, c.vertices);
  EXPECT_EQ(g.ncon, c.ncon);
  EXPECT_EQ(g.vertex_weights, c.vertex_weights);
  EXPECT_EQ(g.vertex_sizes, c.vertex_sizes);
  EXPECT_EQ(entries_of(g.adjacency), c.expected);
}

const GraphFile kGraphFiles[] = {
    {"EdgeWeightsBecomeValues",
     "metis/edge_weights.graph",
     3,
     0,
     {},
     {},
     {{{0, 1}, 5.0f}, {{1, 0}, 5.0f}, {{1, 2}, 7.0f}, {{2, 1}, 7.0f}}},
    {"MultipleVertexWeights",
     "metis/vertex_weights.graph",
     3,
     2,
     {4, 1, 0, 9, 2, 2},
     {},
     {{{0, 1}, 1.0f}, {{1, 0}, 1.0f}, {{1, 2}, 1.0f}, {{2, 1}, 1.0f}}},
    {"SizesWeightsAndEdgeWeights",
     "metis/sizes_weights_edges.graph",
     3,
     1,
     {1, 2, 3},
     {10, 20, 30},
     {{{0, 1}, 3.0f}, {{1, 0}, 3.0f}, {{1, 2}, 4.0f}, {{2, 1}, 4.0f}}},
    {"CrlfAndCommentBetweenVertices",
     "metis/crlf.graph",
     3,
     0,
     {},
     {},
     {{{0, 1}, 1.0f}, {{1, 0}, 1.0f}, {{1, 2}, 1.0f}, {{2, 1}, 1.0f}}},
    // "4 4 10 3 0": fmt 10 (vertex weights), ncon 3, then a token METIS ignores; comments,
    // trailing blanks and a tab.
    {"ThreeVertexWeightsAndAFifthHeaderToken",
     "metis/wild_fmt10_ncon3_fifth_token.graph",
     4,
     3,
     {1, 0, 5, 2, 1, 5, 3, 1, 0, 4, 2, 1},
     {},
     {{{0, 1}, 1.0f},
      {{0, 2}, 1.0f},
      {{1, 0}, 1.0f},
      {{1, 2}, 1.0f},
      {{2, 0}, 1.0f},
      {{2, 1}, 1.0f},
      {{2, 3}, 1.0f},
      {{3, 2}, 1.0f}}},
    {"EdgeWeightsWithCrlfTrailingBlanksAndBlankLines",
     "metis/wild_fmt1_crlf.graph",
     3,
     0,
     {},
     {},
     {{{0, 1}, 4.0f},
      {{0, 2}, 1.0f},
      {{1, 0}, 4.0f},
      {{1, 2}, 2.0f},
      {{2, 0}, 1.0f},
      {{2, 1}, 2.0f}}},
    {"Fmt11VertexAndEdgeWeights",
     "metis/wild_fmt11.graph",
     3,
     1,
     {5, 6, 7},
     {},
     {{{0, 1}, 7.0f}, {{1, 0}, 7.0f}, {{1, 2}, 8.0f}, {{2, 1}, 8.0f}}},
};

INSTANTIATE_TEST_SUITE_P(Files, MetisFile, ::testing::ValuesIn(kGraphFiles),
                         test::case_test_name<GraphFile>);

TEST(MetisRead, TrailingBlankLinesAfterTheLastVertex) {
  const MetisGraph g = read_metis_graph(data_path("metis/trailing_blank_lines.graph"));
  EXPECT_EQ(g.adjacency.n_rows, 2);
  EXPECT_EQ(g.adjacency.nnz(), 2);
}

// ---- headers as files in the wild write them (METIS reads n m [fmt [ncon]] and ignores the
// rest of the header line) -----------------------------------------------------------------

TEST(MetisHeader, TokensAfterNconAreIgnored) {
  const MetisGraph g = read_metis_graph(data_path("metis/header_extra_tokens.graph"));
  expect_valid_csr(g.adjacency);
  EXPECT_EQ(g.ncon, 1);
  EXPECT_EQ(g.adjacency.nnz(), 4);
  const test::TempFile more("header_more", "2 1 0 0 x yz 17\n2\n1\n");
  EXPECT_EQ(read_metis_graph(more.path()).adjacency.nnz(), 2);
}

TEST(MetisHeader, FmtWithLeadingZerosAndNconZeroReadAsMetisDoes) {
  // METIS reads fmt as a number: "0001" is fmt 1 (edge weights).
  const test::TempFile fmt("header_fmt", "2 1 0001\n2 3\n1 3\n");
  const MetisGraph g = read_metis_graph(fmt.path());
  EXPECT_EQ(entries_of(g.adjacency), (EntryMap{{{0, 1}, 3.0f}, {{1, 0}, 3.0f}}));
  // ncon 0 means "not given": one vertex weight with fmt 10, none with fmt 0.
  const test::TempFile weights("header_ncon0", "2 1 10 0\n4 2\n5 1\n");
  const MetisGraph w = read_metis_graph(weights.path());
  EXPECT_EQ(w.ncon, 1);
  EXPECT_EQ(w.vertex_weights, (std::vector<std::int64_t>{4, 5}));
  const test::TempFile plain("header_ncon0_plain", "2 1 0 0\n2\n1\n");
  EXPECT_EQ(read_metis_graph(plain.path()).ncon, 0);
}

using BadGraph = test::BadFile;

class MetisBadFile : public ::testing::TestWithParam<BadGraph> {};

TEST_P(MetisBadFile, ThrowsParseErrorWithLineAndReason) {
  const BadGraph& bad = GetParam();
  test::expect_parse_error(data_path(std::string("metis/bad/") + bad.name), bad,
                           [](const std::string& path) { read_metis_graph(path); });
}

const BadGraph kBadGraphs[] = {
    {"empty.graph", 1, "empty file"},
    {"only_comments.graph", 2, "missing header"},
    {"header_nonnumeric.graph", 1, "edge count m 'x' is not a non-negative integer"},
    {"header_overflow.graph", 1, "overflows a 64-bit integer"},
    {"header_bad_fmt.graph", 1, "fmt '12' must be up to three binary digits"},
    {"header_fmt_too_long.graph", 1, "fmt '1000' must be up to three binary digits"},
    {"ncon_without_vertex_weights.graph", 1, "ncon is given but fmt 001 has no vertex weights"},
    {"header_ncon_too_large.graph", 1, "ncon '1025' must be an integer in [0, 1024]"},
    {"too_few_bytes_for_vertices.graph", 1,
     "declares 1000000 vertices but the 0 bytes after the header cannot hold their lines"},
    {"too_few_bytes_for_vertex_weights.graph", 1,
     "declares 2 vertices with 1000 numbers each (fmt: vertex sizes and weights) but the 4 "
     "bytes after the header can hold at most 2 numbers"},
    {"too_few_bytes_for_edges.graph", 2,
     "declares m = 1000000000000 edges (2m = 2000000000000 adjacency entries) but the 4 bytes "
     "after the header can hold at most 2 (2 bytes each at least"},
    {"self_loop.graph", 3, "self-loop: vertex 2 lists itself"},
    {"neighbour_out_of_range.graph", 3, "neighbour 4 is out of range [1, 3]"},
    {"neighbour_zero.graph", 3, "neighbour 0 is out of range"},
    {"neighbour_nonnumeric.graph", 3, "non-numeric neighbour 'v3'"},
    {"neighbour_negative.graph", 3, "negative neighbour '-1'"},
    {"duplicate_neighbour.graph", 2, "vertex 1 lists neighbour 2 more than once"},
    {"m_too_small.graph", 3, "more adjacency entries than the 2m = 2"},
    {"m_too_large.graph", 2,
     "declares m = 3 edges (2m = 6 adjacency entries) but the vertex "
     "lines hold 2"},
    {"asymmetric.graph", 4, "edge 1-2 has no reverse: vertex 2 does not list 1"},
    {"asymmetric_lower.graph", 4, "edge 2-1 has no reverse: vertex 1 does not list 2"},
    {"weight_mismatch.graph", 2, "edge 1-2 has weight 5 but its reverse has weight 6"},
    {"missing_edge_weight.graph", 2, "missing edge weight after neighbour 2"},
    {"zero_edge_weight.graph", 2, "edge weight '0' for neighbour 2 is not a positive integer"},
    {"missing_vertex_weight.graph", 3, "missing vertex weight"},
    {"negative_vertex_weight.graph", 2, "vertex weight '-1' is not a non-negative integer"},
    {"truncated.graph", 3, "file ends after 2 of the 4 vertex lines"},
    {"truncated_early.graph", 1, "can hold at most 3 (2 bytes each at least; truncated file?)"},
    {"extra_data.graph", 4, "extra data after the 2 vertex lines"},
};

INSTANTIATE_TEST_SUITE_P(Fixtures, MetisBadFile, ::testing::ValuesIn(kBadGraphs),
                         test::bad_file_test_name);

TEST(MetisRobustness, MutatedGraphsParseOrRaiseParseError) {
  std::mt19937_64 rng(31);
  int parsed = 0;
  int rejected = 0;
  for (const char* name : {"plain.graph", "edge_weights.graph", "vertex_weights.graph",
                           "sizes_weights_edges.graph", "crlf.graph"}) {
    const std::string original = test::read_file(data_path(std::string("metis/") + name));
    for (int trial = 0; trial < 400; ++trial) {
      test::parse_or_reject(
          "mutant_graph", test::mutate(original, 0, rng, "0123456789 -%\n\r\tx", 1),
          [](const std::string& path) { expect_valid_csr(read_metis_graph(path).adjacency); },
          &parsed, &rejected);
    }
  }
  EXPECT_GT(parsed, 0);
  EXPECT_GT(rejected, 0);
}

TEST(MetisErrors, NonexistentFile) {
  try {
    read_metis_graph(data_path("metis/no_such.graph"));
    ADD_FAILURE() << "no error";
  } catch (const ParseError& e) {
    EXPECT_EQ(e.line(), 0);
    EXPECT_NE(e.reason().find("cannot open file"), std::string::npos) << e.what();
  }
}

}  // namespace
}  // namespace netsparse

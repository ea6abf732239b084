// The emulator's matrices: a generated matrix made a node's block at a time (pattern_workload)
// is exactly the whole matrix's work (gather_workload), the paper's matrices have the shapes
// they claim, and a malformed specification is refused with its reason.
#include <gtest/gtest.h>

#include <stdexcept>
#include <string>

#include "emulate/workload.hpp"

namespace {

using namespace netsparse::emulate;

void expect_same_work(const std::string& spec, int nodes, int ranks_per_node) {
  SCOPED_TRACE(spec + ", " + std::to_string(nodes) + " nodes of " + std::to_string(ranks_per_node));
  const netsparse::CsrMatrix a = load_matrix_spec(spec, 3);
  const Workload whole = gather_workload(a, nodes, 64, ranks_per_node);
  const PatternWorkload blocks = pattern_workload(spec, 3, nodes, 64, ranks_per_node);
  EXPECT_EQ(blocks.w.row_offsets, whole.row_offsets);
  EXPECT_EQ(blocks.w.prop_bytes, whole.prop_bytes);
  ASSERT_EQ(blocks.w.idxs.size(), whole.idxs.size());
  for (std::size_t p = 0; p < whole.idxs.size(); ++p) EXPECT_EQ(blocks.w.idxs[p], whole.idxs[p]);
  EXPECT_EQ(blocks.row_ptr, a.row_ptr);
}

TEST(Workload, NodeBlocksGiveTheWholeMatrixsWork) {
  expect_same_work("gen:kron:12:8", 7, 1);
  expect_same_work("gen:kron:11", 4, 3);
  expect_same_work("gen:road:40:30:0.05:9:0.6", 5, 2);
  expect_same_work("gen:kron:10:4:77", 3, 1);
  expect_same_work("gen:web:5000:12:0.8", 4, 2);
  expect_same_work("gen:road:33", 8, 1);
  expect_same_work("gen:stencil:6:5:4:2", 6, 1);
  expect_same_work("gen:stencil:7", 3, 4);
}

TEST(Workload, PaperMatricesHaveTheirShapes) {
  EXPECT_EQ(matrix_generator("paper:arabic", 1).rows, 22744080);
  EXPECT_EQ(matrix_generator("paper:arabic-kron", 1).rows, netsparse::gidx_t{1} << 24);
  EXPECT_EQ(matrix_generator("paper:europe", 1).rows, netsparse::gidx_t{7150} * 7150);
  EXPECT_EQ(matrix_generator("paper:queen", 1).rows, netsparse::gidx_t{111} * 111 * 111 * 3);
  // A block of europe's rows: about 2.1 nonzeros per row (europe_osm: 108 M / 50.9 M).
  const MatrixGenerator europe = matrix_generator("paper:europe", 1);
  const netsparse::CsrMatrix rows = europe.block(1000000, 1200000);
  EXPECT_NEAR(static_cast<double>(rows.nnz()) / 200000.0, 2.13, 0.03);
  // An interior row of queen (the point (50, 50, 50)): 27 points x 3 unknowns.
  const netsparse::CsrMatrix queen = matrix_generator("paper:queen", 1).block(1864950, 1864951);
  EXPECT_EQ(queen.nnz(), 81);
  EXPECT_FALSE(matrix_generator("some/file.mtx", 1).block);  // a file: read whole
}

TEST(Workload, MalformedSpecificationsAreRefusedWithTheReason) {
  const auto reason = [](const std::string& spec) {
    try {
      (void)matrix_generator(spec, 1);
    } catch (const std::invalid_argument& e) {
      return std::string(e.what());
    }
    return std::string("accepted");
  };
  // The library's parser (netsparse/generator_spec.hpp) names the field and its range.
  EXPECT_NE(reason("gen:road:10:x").find("HEIGHT 'x' is not a valid number"), std::string::npos);
  EXPECT_NE(reason("gen:kron:0").find("SCALE must be in [1, 40]"), std::string::npos);
  EXPECT_NE(reason("gen:road:10:10:2").find("LONG_FRACTION must be in [0, 1]"), std::string::npos);
  EXPECT_NE(reason("gen:stencil:4:4").find("gen:stencil takes 3 to 4 parameters"),
            std::string::npos);
  EXPECT_NE(reason("gen:kron:10:4:1:2").find("gen:kron takes 1 to 3 parameters"),
            std::string::npos);
  EXPECT_NE(reason("gen:road:10:10:0.1:1:1.5").find("GRID_FRACTION must be in [0, 1]"),
            std::string::npos);
  EXPECT_NE(reason("gen:bogus:3").find("unknown generator 'bogus'"), std::string::npos);
  EXPECT_NE(reason("paper:nope").find("unknown paper matrix"), std::string::npos);
  EXPECT_NE(reason("gen:web:100:0.5").find("MEAN_DEGREE must be in [1, 10000]"), std::string::npos);
  // What the library would generate but one process cannot hold.
  EXPECT_NE(reason("gen:kron:40").find("more than the emulator's"), std::string::npos);
}

}  // namespace

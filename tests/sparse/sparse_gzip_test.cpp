// gzip-compressed input: detected by content (the magic bytes 1f 8b), never by name, read by
// both readers exactly as the plain text; corrupt, truncated or oversized data is a ParseError
// naming the file.
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "gzip_test_util.hpp"
#include "netsparse/matrix_market.hpp"
#include "netsparse/metis.hpp"
#include "sparse/input_bytes.hpp"
#include "sparse_test_util.hpp"

namespace netsparse {
namespace {

using test::data_path;
using test::expect_same_csr;
using test::expect_valid_csr;
using test::gzip_bytes;
using test::read_file;
using test::TempFile;

void expect_same_graph(const MetisGraph& a, const MetisGraph& b) {
  expect_same_csr(a.adjacency, b.adjacency);
  EXPECT_EQ(a.ncon, b.ncon);
  EXPECT_EQ(a.vertex_weights, b.vertex_weights);
  EXPECT_EQ(a.vertex_sizes, b.vertex_sizes);
}

// The ParseError a call throws (fails the test if it throws none).
template <class F>
ParseError error_of(F&& f) {
  try {
    f();
  } catch (const ParseError& e) {
    return e;
  }
  ADD_FAILURE() << "no ParseError";
  return ParseError("", -1, "");
}

const char* const kMatrixMarketFixtures[] = {
    "general_real.mtx",      "symmetric_real.mtx", "skew_real.mtx", "pattern_general.mtx",
    "integer_symmetric.mtx", "layout.mtx",         "crlf.mtx",      "empty_matrix.mtx"};

const char* const kMetisFixtures[] = {"plain.graph",          "edge_weights.graph",
                                      "vertex_weights.graph", "sizes_weights_edges.graph",
                                      "crlf.graph",           "wild_fmt10_ncon3_fifth_token.graph",
                                      "wild_fmt1_crlf.graph", "wild_fmt11.graph"};

TEST(GzipMatrixMarket, CompressedFileReadsAsThePlainOne) {
  for (const char* name : kMatrixMarketFixtures) {
    SCOPED_TRACE(name);
    const std::string plain_path = data_path(std::string("mm/") + name);
    const std::string text = read_file(plain_path);
    const TempFile gz("gz_mm", gzip_bytes(text));
    const CsrMatrix plain = read_matrix_market(plain_path);
    const CsrMatrix unzipped = read_matrix_market(gz.path());
    expect_valid_csr(unzipped);
    expect_same_csr(unzipped, plain);
    expect_same_csr(parse_matrix_market(gzip_bytes(text), name), plain);
    // The header describes the decompressed content; byte ranges are ranges of it.
    const MatrixMarketHeader h = read_matrix_market_header(gz.path());
    const MatrixMarketHeader hp = read_matrix_market_header(plain_path);
    EXPECT_EQ(h.file_size, text.size());
    EXPECT_EQ(h.data_offset, hp.data_offset);
    EXPECT_EQ(h.n_entries, hp.n_entries);
    const std::uint64_t cut = h.data_offset + (h.file_size - h.data_offset) / 2;
    const MatrixMarketChunk first = parse_matrix_market_entries(gz.path(), h, {0, cut});
    const MatrixMarketChunk second = parse_matrix_market_entries(gz.path(), h, {cut, h.file_size});
    EXPECT_EQ(first.n_entries + second.n_entries, h.n_entries);
    EXPECT_NO_THROW(check_matrix_market_entry_count(gz.path(), h, h.n_entries));
    if (plain.n_rows >= 2) {
      expect_same_csr(read_matrix_market(gz.path(), 1, plain.n_rows),
                      test::row_block(plain, 1, plain.n_rows));
    }
  }
}

TEST(GzipMatrixMarket, FileWrittenByGzipWithItsNameField) {
  // tests/data/mm/gzip/general_real.mtx.gz is `gzip -c` output (FNAME and MTIME set).
  expect_same_csr(read_matrix_market(data_path("mm/gzip/general_real.mtx.gz")),
                  read_matrix_market(data_path("mm/general_real.mtx")));
}

TEST(GzipMatrixMarket, ConcatenatedMembersAreOneContent) {
  const std::string text = read_file(data_path("mm/layout.mtx"));
  const size_t half = text.size() / 2;
  const TempFile gz("gz_members", gzip_bytes(text.substr(0, half)) + gzip_bytes(text.substr(half)));
  expect_same_csr(read_matrix_market(gz.path()), read_matrix_market(data_path("mm/layout.mtx")));
}

TEST(GzipMatrixMarket, ContentDecidesNotTheName) {
  // A plain file called .gz is read as plain text; gzip data called .mtx is decompressed.
  const std::string path = data_path("mm/general_real.mtx");
  const std::string text = read_file(path);
  const CsrMatrix plain = read_matrix_market(path);
  const TempFile named_gz("plain_named", text);
  const std::string gz_name = named_gz.path() + ".mtx.gz";
  std::rename(named_gz.path().c_str(), gz_name.c_str());
  expect_same_csr(read_matrix_market(gz_name), plain);
  std::remove(gz_name.c_str());
  const TempFile gz_named_mtx("gz_named", gzip_bytes(text));
  expect_same_csr(read_matrix_market(gz_named_mtx.path()), plain);
}

TEST(GzipMatrixMarket, ErrorsCarryTheDecompressedLineNumbers) {
  const std::string path = data_path("mm/bad/crlf_error.mtx");
  const TempFile gz("gz_bad", gzip_bytes(read_file(path)));
  const ParseError e = error_of([&] { read_matrix_market(gz.path()); });
  EXPECT_EQ(e.file(), gz.path());
  EXPECT_EQ(e.line(), 8);
  EXPECT_NE(e.reason().find("column index 4 is out of range [1, 3]"), std::string::npos)
      << e.what();
}

TEST(GzipMatrixMarket, EmptyContentIsAnEmptyFile) {
  const TempFile gz("gz_empty", gzip_bytes(""));
  const ParseError e = error_of([&] { read_matrix_market(gz.path()); });
  EXPECT_EQ(e.line(), 1);
  EXPECT_NE(e.reason().find("empty file"), std::string::npos) << e.what();
}

TEST(GzipErrors, TruncatedAtEveryLength) {
  const std::string gz = gzip_bytes(read_file(data_path("mm/symmetric_real.mtx")));
  for (size_t len = 2; len < gz.size(); ++len) {
    const TempFile f("gz_cut", gz.substr(0, len));
    const ParseError e = error_of([&] { read_matrix_market(f.path()); });
    EXPECT_EQ(e.file(), f.path());
    EXPECT_EQ(e.line(), 0) << "cut at " << len;
    EXPECT_NE(e.reason().find("truncated gzip file"), std::string::npos)
        << "cut at " << len << ": " << e.what();
    const ParseError em = error_of([&] { read_metis_graph(f.path()); });
    EXPECT_NE(em.reason().find("truncated gzip file"), std::string::npos) << em.what();
  }
}

TEST(GzipErrors, CorruptDataAndChecksum) {
  const std::string gz = gzip_bytes(read_file(data_path("mm/symmetric_real.mtx")));
  // The first deflate byte: block type 3 does not exist.
  std::string bad_block = gz;
  bad_block[10] = static_cast<char>(0xff);
  // The CRC-32 in the trailer.
  std::string bad_crc = gz;
  bad_crc[gz.size() - 8] = static_cast<char>(bad_crc[gz.size() - 8] ^ 0x55);
  // The header's compression method (8 = deflate is the only one).
  std::string bad_method = gz;
  bad_method[2] = 7;
  for (const std::string& bytes : {bad_block, bad_crc, bad_method}) {
    const TempFile f("gz_corrupt", bytes);
    const ParseError e = error_of([&] { read_matrix_market(f.path()); });
    EXPECT_EQ(e.file(), f.path());
    EXPECT_EQ(e.line(), 0);
    EXPECT_NE(e.reason().find("corrupt gzip data"), std::string::npos) << e.what();
    EXPECT_THROW(read_metis_graph(f.path()), ParseError);
    EXPECT_THROW(parse_matrix_market(bytes, "mem"), ParseError);
  }
}

TEST(GzipErrors, TrailingBytesAfterTheStream) {
  const TempFile f("gz_trailing", gzip_bytes(read_file(data_path("mm/layout.mtx"))) + "junk");
  const ParseError e = error_of([&] { read_matrix_market(f.path()); });
  EXPECT_EQ(e.line(), 0);
  EXPECT_NE(e.reason().find("4 bytes of trailing data after the gzip stream"), std::string::npos)
      << e.what();
}

TEST(GzipErrors, ContentBeyondTheLimitIsRefused) {
  // The readers' limit is the process's memory budget; gunzip takes it as a parameter.
  const std::string zeros(1 << 20, '0');
  const std::string gz = gzip_bytes(zeros);
  try {
    (void)sparse_detail::gunzip(gz, "bomb.gz", 100000);
    ADD_FAILURE() << "no error";
  } catch (const ParseError& e) {
    EXPECT_EQ(e.file(), "bomb.gz");
    EXPECT_EQ(e.line(), 0);
    EXPECT_NE(e.reason().find("decompresses to more than 97.7 KiB"), std::string::npos) << e.what();
  }
  const sparse_detail::Inflated exact = sparse_detail::gunzip(gz, "exact.gz", zeros.size());
  ASSERT_EQ(exact.size, zeros.size());
  EXPECT_EQ(std::string(exact.data.get(), exact.size), zeros);
  EXPECT_GT(sparse_detail::memory_budget_bytes(), std::uint64_t{1} << 20);
}

TEST(GzipMetis, CompressedGraphReadsAsThePlainOne) {
  for (const char* name : kMetisFixtures) {
    SCOPED_TRACE(name);
    const std::string plain_path = data_path(std::string("metis/") + name);
    const std::string text = read_file(plain_path);
    const TempFile gz("gz_graph", gzip_bytes(text));
    const MetisGraph plain = read_metis_graph(plain_path);
    expect_same_graph(read_metis_graph(gz.path()), plain);
    expect_same_graph(parse_metis_graph(gzip_bytes(text), name), plain);
    expect_same_graph(parse_metis_graph(text, name), plain);
  }
  expect_same_graph(read_metis_graph(data_path("metis/gzip/wild_fmt10_ncon3_fifth_token.graph.gz")),
                    read_metis_graph(data_path("metis/wild_fmt10_ncon3_fifth_token.graph")));
}

TEST(GzipMetis, ErrorsCarryTheDecompressedLineNumbers) {
  const TempFile gz("gz_bad_graph", gzip_bytes(read_file(data_path("metis/bad/self_loop.graph"))));
  const ParseError e = error_of([&] { read_metis_graph(gz.path()); });
  EXPECT_EQ(e.file(), gz.path());
  EXPECT_EQ(e.line(), 3);
  EXPECT_NE(e.reason().find("self-loop"), std::string::npos) << e.what();
}

TEST(FormatDetection, DecidedOnTheDecompressedContent) {
  const std::string mtx = data_path("mm/general_real.mtx");
  const std::string graph = data_path("metis/plain.graph");
  EXPECT_TRUE(is_matrix_market_file(mtx));
  EXPECT_FALSE(is_matrix_market_file(graph));
  EXPECT_TRUE(is_matrix_market_file(data_path("mm/gzip/general_real.mtx.gz")));
  EXPECT_TRUE(is_matrix_market_file(data_path("mm/layout.mtx")));  // mixed-case banner
  EXPECT_FALSE(
      is_matrix_market_file(data_path("metis/gzip/wild_fmt10_ncon3_fifth_token.graph.gz")));
  // The banner split across two gzip members, and a gzipped METIS file whose first comment
  // mentions the banner word later on its line.
  const std::string text = read_file(mtx);
  const TempFile split("gz_split", gzip_bytes(text.substr(0, 5)) + gzip_bytes(text.substr(5)));
  EXPECT_TRUE(is_matrix_market_file(split.path()));
  const TempFile comment("gz_comment", gzip_bytes("% not %%MatrixMarket\n1 0\n\n"));
  EXPECT_FALSE(is_matrix_market_file(comment.path()));
  // Only the start is inflated: a file truncated later is still recognized (reading it fails).
  const std::string gz = gzip_bytes(text);
  const TempFile cut("gz_cut_detect", gz.substr(0, gz.size() - 8));
  EXPECT_TRUE(is_matrix_market_file(cut.path()));
  // Binary garbage behind the magic bytes, and a missing file.
  // (a gzip header, then a deflate block of the reserved type 3)
  const TempFile garbage("gz_garbage",
                         std::string("\x1f\x8b\x08\x00\x00\x00\x00\x00\x00\x03\x07garbage", 18));
  EXPECT_THROW(is_matrix_market_file(garbage.path()), ParseError);
  EXPECT_THROW(is_matrix_market_file(data_path("mm/no_such.mtx")), ParseError);
  // A plain file holding the gzip magic and nothing else is (truncated) gzip data.
  const TempFile magic("gz_magic_only", std::string("\x1f\x8b", 2));
  EXPECT_FALSE(is_matrix_market_file(magic.path()));
  EXPECT_NE(error_of([&] { read_matrix_market(magic.path()); }).reason().find("truncated gzip"),
            std::string::npos);
}

}  // namespace
}  // namespace netsparse

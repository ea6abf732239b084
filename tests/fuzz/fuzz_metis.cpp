// libFuzzer target for the METIS graph reader. The input is a file's bytes (plain or gzip).
// Checks, under ASan/UBSan:
//  * parse_metis_graph either returns a graph whose adjacency keeps the CsrMatrix invariants
//    and the reader's promises (n x n, symmetric with equal weights both ways, no self-loops,
//    positive integer weights, n * ncon vertex weights, n or no vertex sizes), or throws a
//    well-formed ParseError; any other exception, a crash, a sanitizer report or an allocation
//    beyond libFuzzer's malloc limit is a bug;
//  * the same bytes read as a file (a memfd opened by path), and the same bytes
//    gzip-compressed, give the same graph or the same error (line and reason).
#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstring>
#include <memory>
#include <string>
#include <string_view>

#include "../sparse/gzip_test_util.hpp"
#include "fuzz_sparse_util.hpp"
#include "netsparse/metis.hpp"
#include "sparse/input_bytes.hpp"

using namespace netsparse;
using namespace netsparse::fuzz;

namespace {

bool same_graph(const MetisGraph& a, const MetisGraph& b) {
  return same_matrix(a.adjacency, b.adjacency) && a.ncon == b.ncon &&
         a.vertex_weights == b.vertex_weights && a.vertex_sizes == b.vertex_sizes;
}

void check_graph(const MetisGraph& g) {
  const CsrMatrix& a = g.adjacency;
  check_csr(a, "adjacency");
  const gidx_t n = a.n_rows;
  require(a.row_begin == 0 && a.n_rows_global == n && a.n_cols == n, "adjacency not n x n");
  require(g.ncon >= 0 && g.vertex_weights.size() == static_cast<std::size_t>(n * g.ncon),
          "vertex_weights size is not n * ncon");
  require(g.vertex_sizes.empty() || g.vertex_sizes.size() == static_cast<std::size_t>(n),
          "vertex_sizes size is neither 0 nor n");
  for (const std::int64_t w : g.vertex_weights) require(w >= 0, "graph", "negative vertex weight");
  for (const std::int64_t s : g.vertex_sizes) require(s >= 0, "graph", "negative vertex size");
  require(a.nnz() % 2 == 0, "odd number of adjacency entries");
  for (gidx_t i = 0; i < n; ++i) {
    for (std::int64_t k = a.row_ptr[i]; k < a.row_ptr[i + 1]; ++k) {
      const gidx_t j = a.col_idx[k];
      const double w = a.values[k];
      require(j != i, "graph", "self-loop");
      require(w >= 1.0 && w == std::floor(w), "graph", "edge weight not a positive integer");
      const auto begin = a.col_idx.begin() + a.row_ptr[j];
      const auto end = a.col_idx.begin() + a.row_ptr[j + 1];
      const auto it = std::lower_bound(begin, end, i);
      require(it != end && *it == i, "graph", "edge without its reverse");
      require(a.values[it - a.col_idx.begin()] == w, "graph", "reverse edge with another weight");
    }
  }
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const std::uint8_t* data, std::size_t size) {
  // Exactly sized heap copy: a read past the end trips ASan.
  std::unique_ptr<char[]> copy(new char[size]);
  if (size != 0) std::memcpy(copy.get(), data, size);
  const std::string_view bytes(copy.get(), size);

  const auto mem = run("memory", [&] { return parse_metis_graph(bytes, "fuzz.graph"); });
  if (mem.value) check_graph(*mem.value);
  static MemFile file;
  file.write(data, size);
  require_same_from_file_and_gzip(
      mem, bytes, file, [](const std::string& path) { return read_metis_graph(path); },
      [](std::string_view gz, const char* name) { return parse_metis_graph(gz, name); },
      "fuzz.graph.gz", same_graph);
  return 0;
}

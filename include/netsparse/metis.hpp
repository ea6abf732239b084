// METIS graph file reader (the format of gpmetis' input, METIS 5 manual section 4.1.1).
//
//   % comments (lines whose first character is '%') may appear anywhere
//   n m [fmt [ncon]]          header: n vertices, m undirected edges
//   one line per vertex i = 1..n, in order: [size] [w_1 .. w_ncon] (neighbour [edge weight])*
//
// fmt is up to three binary digits "abc": a = vertex sizes present, b = ncon vertex weights
// present (ncon defaults to 1), c = edge weights present. A vertex line may be empty (isolated
// vertex), so blank lines are vertex lines; only whitespace-only lines after the n-th vertex
// are ignored. Errors (ParseError "FILE:LINE: reason"): bad header, out-of-range or
// non-numeric neighbours, self-loops, a neighbour listed twice, missing edge weights, an
// adjacency count other than 2m, an edge without its reverse edge (or with a different weight),
// missing or surplus vertex lines.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "netsparse/csr.hpp"
#include "netsparse/sparse_error.hpp"

namespace netsparse {

struct MetisGraph {
  // n x n, symmetric, one nonzero per directed adjacency entry (2m in all), value 1.0f or the
  // edge weight.
  CsrMatrix adjacency;
  int ncon = 0;                              // vertex weights per vertex (0: none in the file)
  std::vector<std::int64_t> vertex_weights;  // n * ncon, vertex-major; empty if ncon == 0
  std::vector<std::int64_t> vertex_sizes;    // n, or empty if the file has none
};

MetisGraph read_metis_graph(const std::string& path);

}  // namespace netsparse

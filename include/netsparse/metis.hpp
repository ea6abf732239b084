// METIS graph file reader (the format of gpmetis' input, METIS 5 manual section 4.1.1).
//
//   % comments (lines whose first character is '%') may appear anywhere
//   n m [fmt [ncon]]          header: n vertices, m undirected edges
//   one line per vertex i = 1..n, in order: [size] [w_1 .. w_ncon] (neighbour [edge weight])*
//
// fmt is up to three binary digits "abc" (leading zeros beyond three digits are allowed, as
// METIS reads fmt as a number): a = vertex sizes present, b = ncon vertex weights present, c =
// edge weights present. ncon = 0 means "not given"; ncon defaults to 1 when fmt has vertex
// weights. As METIS' own reader, which scans at most four numbers from the header, anything
// after ncon is ignored (files in the wild carry a fifth token, e.g. "62631 366559 10 3 0").
// A vertex line may be empty (isolated vertex), so blank lines are vertex lines; only
// whitespace-only lines after the n-th vertex are ignored. LF or CRLF line endings.
//
// Errors (ParseError "FILE:LINE: reason"): bad header, a header declaring more vertices,
// vertex weights or edges than the rest of the file can hold (refused before anything is
// allocated: every array the reader allocates is bounded by a small multiple of the file's
// size), out-of-range or non-numeric neighbours, self-loops, a neighbour listed twice, missing
// edge weights, an adjacency count other than 2m, an edge without its reverse edge (or with a
// different weight), missing or surplus vertex lines.
//
// Compressed input: a file whose content starts with the gzip magic bytes (1f 8b), whatever its
// name, is decompressed into memory first, with the limits and errors matrix_market.hpp
// describes; line numbers are those of the decompressed text.
#pragma once

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "netsparse/csr.hpp"
#include "netsparse/sparse_error.hpp"

namespace netsparse {

struct MetisGraph {
  // n x n, symmetric, one nonzero per directed adjacency entry (2m in all), value 1.0 or the
  // edge weight.
  CsrMatrix adjacency;
  int ncon = 0;                              // vertex weights per vertex (0: none in the file)
  std::vector<std::int64_t> vertex_weights;  // n * ncon, vertex-major; empty if ncon == 0
  std::vector<std::int64_t> vertex_sizes;    // n, or empty if the file has none
};

MetisGraph read_metis_graph(const std::string& path);

// The same from bytes in memory (gzip-compressed or not); `name` stands for the file in
// ParseError messages.
MetisGraph parse_metis_graph(std::string_view bytes, const std::string& name = "<memory>");

}  // namespace netsparse

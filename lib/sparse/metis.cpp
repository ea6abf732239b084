// METIS graph reader. Vertex i's adjacency is line i, so lines map straight to CSR rows and no
// COO stage is needed. Serial: the line -> vertex mapping depends on every comment line before
// it, and the METIS files we meet are small (mdual: 7 MB) next to Matrix Market inputs.
#include "netsparse/metis.hpp"

#include <omp.h>

#include <algorithm>
#include <charconv>
#include <cstdint>
#include <limits>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "sparse/input_bytes.hpp"
#include "sparse/text_scan.hpp"

namespace netsparse {

namespace {

using sparse_detail::InputBytes;
using sparse_detail::line_end;
using sparse_detail::NumberStatus;
using sparse_detail::parse_integer;
using sparse_detail::quoted_token;
using sparse_detail::skip_blanks;

// Walks the lines of a text, numbering them from 1.
class LineCursor {
 public:
  explicit LineCursor(std::string_view text) : p_(text.data()), end_(text.data() + text.size()) {}

  // The next line as [begin, end) without its '\n'; false at the end of the text.
  bool next(const char*& begin, const char*& end) {
    if (p_ >= end_) return false;
    begin = p_;
    end = line_end(p_, end_);
    p_ = end < end_ ? end + 1 : end_;
    ++line_;
    return true;
  }
  // Like next(), but skips comment lines ('%' first).
  bool next_non_comment(const char*& begin, const char*& end) {
    while (next(begin, end)) {
      if (begin == end || *begin != '%') return true;
    }
    return false;
  }
  [[nodiscard]] std::int64_t line() const noexcept { return line_; }
  [[nodiscard]] std::int64_t bytes_left() const noexcept { return end_ - p_; }

 private:
  const char* p_;
  const char* end_;
  std::int64_t line_ = 0;
};

bool is_blank_line(const char* b, const char* e) {
  return skip_blanks(b, e) == e;
}

std::string shortest(double value) {
  char buffer[32];
  return std::string(buffer, std::to_chars(buffer, buffer + sizeof buffer, value).ptr);
}

// More vertex weights per vertex than any partitioner uses: a larger ncon is a broken header.
constexpr std::int64_t kMaxNcon = 1024;

struct Header {
  std::int64_t n = 0;
  std::int64_t m = 0;
  bool has_sizes = false;
  bool has_vertex_weights = false;
  bool has_edge_weights = false;
  int ncon = 0;
  std::int64_t line = 0;
};

class MetisParser {
 public:
  MetisParser(std::string_view bytes, const std::string& path) : bytes_(bytes), path_(path) {}

  MetisGraph parse() {
    if (bytes_.empty()) fail(1, "empty file (expected the header 'n m [fmt [ncon]]')");
    LineCursor lines(bytes_);
    const Header h = parse_header(lines);

    MetisGraph graph;
    CsrMatrix& a = graph.adjacency;
    a.n_rows_global = a.n_cols = a.n_rows = h.n;
    a.row_begin = 0;
    a.row_ptr.assign(static_cast<size_t>(h.n) + 1, 0);
    // What the header promises: check_fits has bounded it by the file's size.
    a.col_idx.reserve(static_cast<size_t>(2 * h.m));
    a.values.reserve(static_cast<size_t>(2 * h.m));
    graph.ncon = h.ncon;
    if (h.has_vertex_weights) graph.vertex_weights.resize(static_cast<size_t>(h.n * h.ncon));
    if (h.has_sizes) graph.vertex_sizes.resize(static_cast<size_t>(h.n));

    std::vector<std::pair<gidx_t, double>> row;  // one vertex's (neighbour, weight), reused
    const char* b = nullptr;
    const char* e = nullptr;
    for (std::int64_t v = 0; v < h.n; ++v) {
      if (!lines.next_non_comment(b, e)) {
        fail(std::max<std::int64_t>(lines.line(), 1),
             "file ends after " + std::to_string(v) + " of the " + std::to_string(h.n) +
                 " vertex lines the header (line " + std::to_string(h.line) + ") declares");
      }
      const std::int64_t line = lines.line();
      const char* q = skip_blanks(b, e);
      if (h.has_sizes) {
        graph.vertex_sizes[v] = parse_count(q, e, line, "vertex size");
      }
      for (int c = 0; c < h.ncon; ++c) {
        graph.vertex_weights[v * h.ncon + c] = parse_count(q, e, line, "vertex weight");
      }
      row.clear();
      while (q < e) {
        const auto nb = parse_integer(q, e, /*allow_negative=*/false);
        if (nb.status != NumberStatus::ok || nb.value < 1 || nb.value > h.n) {
          bad_neighbour(nb.status, nb.value, q, e, line, h.n);
        }
        if (nb.value == v + 1) {
          fail(line, "self-loop: vertex " + std::to_string(v + 1) + " lists itself");
        }
        q = skip_blanks(nb.next, e);
        double weight = 1.0;
        if (h.has_edge_weights) {
          if (q == e) {
            fail(line, "missing edge weight after neighbour " + std::to_string(nb.value) +
                           " (fmt says edges are weighted)");
          }
          const auto w = parse_integer(q, e, /*allow_negative=*/true);
          if (w.status != NumberStatus::ok || w.value <= 0) {
            fail(line, "edge weight " + quoted_token(q, e) + " for neighbour " +
                           std::to_string(nb.value) + " is not a positive integer");
          }
          weight = static_cast<double>(w.value);
          q = skip_blanks(w.next, e);
        }
        row.emplace_back(nb.value - 1, weight);
      }
      total_entries_ += static_cast<std::int64_t>(row.size());
      if (total_entries_ > 2 * h.m) {
        fail(line, "more adjacency entries than the 2m = " + std::to_string(2 * h.m) +
                       " the header (line " + std::to_string(h.line) + ") declares (m = " +
                       std::to_string(h.m) + " undirected edges, each listed by both ends)");
      }
      std::sort(row.begin(), row.end());
      for (size_t k = 1; k < row.size(); ++k) {
        if (row[k].first == row[k - 1].first) {
          fail(line, "vertex " + std::to_string(v + 1) + " lists neighbour " +
                         std::to_string(row[k].first + 1) + " more than once");
        }
      }
      for (const auto& [col, weight] : row) {
        a.col_idx.push_back(col);
        a.values.push_back(weight);
      }
      a.row_ptr[v + 1] = static_cast<std::int64_t>(a.col_idx.size());
    }
    while (lines.next(b, e)) {
      if (b != e && *b == '%') continue;
      if (!is_blank_line(b, e)) {
        fail(lines.line(), "extra data after the " + std::to_string(h.n) +
                               " vertex lines the header (line " + std::to_string(h.line) +
                               ") declares");
      }
    }
    if (total_entries_ != 2 * h.m) {
      fail(h.line, "the header declares m = " + std::to_string(h.m) + " edges (2m = " +
                       std::to_string(2 * h.m) + " adjacency entries) but the vertex lines hold " +
                       std::to_string(total_entries_));
    }
    check_symmetric(graph.adjacency, h);
    return graph;
  }

 private:
  [[noreturn]] void fail(std::int64_t line, const std::string& reason) const {
    throw ParseError(path_, line, reason);
  }

  Header parse_header(LineCursor& lines) const {
    const char* b = nullptr;
    const char* e = nullptr;
    do {
      if (!lines.next_non_comment(b, e)) {
        fail(std::max<std::int64_t>(lines.line(), 1),
             "missing header 'n m [fmt [ncon]]' (the file holds only comments)");
      }
    } while (is_blank_line(b, e));
    Header h;
    h.line = lines.line();
    const char* q = skip_blanks(b, e);
    const char* const names[2] = {"vertex count n", "edge count m"};
    std::int64_t nm[2] = {0, 0};
    for (int k = 0; k < 2; ++k) {
      if (q == e)
        fail(h.line, std::string("bad header: missing ") + names[k] + " ('n m [fmt [ncon]]')");
      const auto parsed = parse_integer(q, e, /*allow_negative=*/false);
      if (parsed.status != NumberStatus::ok) {
        fail(h.line,
             std::string("bad header: ") + names[k] + " " + quoted_token(q, e) +
                 (parsed.status == NumberStatus::out_of_range ? " overflows a 64-bit integer"
                                                              : " is not a non-negative integer"));
      }
      nm[k] = parsed.value;
      q = skip_blanks(parsed.next, e);
    }
    h.n = nm[0];
    h.m = nm[1];
    if (h.m > std::numeric_limits<std::int64_t>::max() / 2) {
      fail(h.line, "bad header: edge count m = " + std::to_string(h.m) + " is too large");
    }
    // fmt: the decimal digits "abc" (vertex sizes, vertex weights, edge weights), leading
    // zeros dropped as METIS' own reader does ("1" = "001" = "0001": edge weights only).
    if (q < e) {
      const char* fe = sparse_detail::token_end(q, e);
      const char* digits = q;
      while (fe - digits > 1 && *digits == '0') ++digits;
      if (fe - digits > 3 || std::any_of(digits, fe, [](char c) { return c != '0' && c != '1'; })) {
        fail(h.line, "bad header: fmt " + quoted_token(q, e) +
                         " must be up to three binary digits (vertex sizes, vertex weights, "
                         "edge weights)");
      }
      const std::string fmt =
          std::string(static_cast<size_t>(3 - (fe - digits)), '0') + std::string(digits, fe);
      h.has_sizes = fmt[0] == '1';
      h.has_vertex_weights = fmt[1] == '1';
      h.has_edge_weights = fmt[2] == '1';
      q = skip_blanks(fe, e);
      // ncon: 0 (as if absent) or the number of vertex weights, which fmt must announce.
      if (q < e) {
        const auto parsed = parse_integer(q, e, /*allow_negative=*/false);
        if (parsed.status != NumberStatus::ok || parsed.value > kMaxNcon) {
          fail(h.line, "bad header: ncon " + quoted_token(q, e) + " must be an integer in [0, " +
                           std::to_string(kMaxNcon) + "]");
        }
        if (parsed.value > 0 && !h.has_vertex_weights) {
          fail(h.line, "bad header: ncon is given but fmt " + fmt + " has no vertex weights");
        }
        h.ncon = static_cast<int>(parsed.value);
        // Anything after ncon is ignored, as METIS' reader (which scans four numbers) does:
        // files in the wild carry a fifth token.
      }
    }
    if (h.has_vertex_weights && h.ncon == 0) h.ncon = 1;
    check_fits(h, lines.bytes_left());
    return h;
  }

  // Refuses, before anything is allocated, a header that declares more than the rest of the
  // file can hold, so a few hostile bytes cannot make the reader allocate gigabytes (every
  // array the reader allocates is then at most a small multiple of the file's size). Each
  // vertex line takes at least one byte (its '\n'), each number on a vertex line at least two
  // (a digit and a blank or the '\n'); only the file's last line may lack its '\n'.
  void check_fits(const Header& h, std::int64_t bytes_left) const {
    using Wide = unsigned __int128;  // n * ncon and 2m * 2 overflow 64 bits for hostile headers
    const Wide room = static_cast<Wide>(bytes_left) + 1;
    const std::string after = "the " + std::to_string(bytes_left) + " bytes after the header";
    if (static_cast<Wide>(h.n) > room) {
      fail(h.line, "the header declares " + std::to_string(h.n) + " vertices but " + after +
                       " cannot hold their lines (truncated file?)");
    }
    const int per_vertex = (h.has_sizes ? 1 : 0) + h.ncon;
    const Wide vertex_numbers = static_cast<Wide>(h.n) * static_cast<Wide>(per_vertex);
    if (2 * vertex_numbers > room) {
      fail(h.line, "the header declares " + std::to_string(h.n) + " vertices with " +
                       std::to_string(per_vertex) + " numbers each (fmt: vertex sizes and " +
                       "weights) but " + after + " can hold at most " +
                       std::to_string(static_cast<std::int64_t>(room / 2)) +
                       " numbers (2 bytes each at least; truncated file?)");
    }
    const int per_entry = h.has_edge_weights ? 2 : 1;  // neighbour [edge weight]
    const Wide entries = 2 * static_cast<Wide>(h.m);
    const Wide max_entries = (room / 2 - vertex_numbers) / static_cast<Wide>(per_entry);
    if (entries > max_entries) {
      fail(h.line, "the header declares m = " + std::to_string(h.m) +
                       " edges (2m = " + std::to_string(2 * h.m) + " adjacency entries) but " +
                       after + " can hold at most " +
                       std::to_string(static_cast<std::int64_t>(max_entries)) + " (" +
                       std::to_string(2 * per_entry) + " bytes each at least; truncated file?)");
    }
  }

  // A non-negative integer token (vertex size or weight); advances q.
  std::int64_t parse_count(const char*& q, const char* e, std::int64_t line,
                           const char* what) const {
    if (q == e)
      fail(line, std::string("missing ") + what + " (fmt says the vertex lines carry it)");
    const auto parsed = parse_integer(q, e, /*allow_negative=*/false);
    if (parsed.status != NumberStatus::ok) {
      fail(line, std::string(what) + " " + quoted_token(q, e) + " is not a non-negative integer");
    }
    q = skip_blanks(parsed.next, e);
    return parsed.value;
  }

  [[noreturn]] void bad_neighbour(NumberStatus status, std::int64_t value, const char* q,
                                  const char* e, std::int64_t line, std::int64_t n) const {
    switch (status) {
      case NumberStatus::negative:
        fail(line, "negative neighbour " + quoted_token(q, e));
      case NumberStatus::out_of_range:
        fail(line, "neighbour " + quoted_token(q, e) + " overflows a 64-bit integer");
      case NumberStatus::not_numeric:
        fail(line, "non-numeric neighbour " + quoted_token(q, e) + " (expected a vertex number)");
      case NumberStatus::ok:
        break;
    }
    fail(line, "neighbour " + std::to_string(value) + " is out of range [1, " + std::to_string(n) +
                   "] (vertices are 1-based)");
  }

  // Every edge (i, j) must have its reverse (j, i) with the same weight. Rows hold no
  // duplicates, so it suffices that every upper entry (i < j) has its reverse and that upper
  // and lower entries are equally many: the reverse map is then a bijection. That halves the
  // (cache-missing) searches; only a failing graph pays for the full check that names the
  // first vertex without a reverse for some edge.
  void check_symmetric(const CsrMatrix& a, const Header& h) const {
    const bool parallel = a.nnz() > (std::int64_t{1} << 16);
    std::int64_t upper_missing = 0;
    std::int64_t upper = 0;
    std::int64_t lower = 0;
#pragma omp parallel for schedule(dynamic, 1024) reduction(+ : upper_missing, upper, lower) \
    if (parallel)
    for (gidx_t i = 0; i < a.n_rows; ++i) {
      for (std::int64_t k = a.row_ptr[i]; k < a.row_ptr[i + 1]; ++k) {
        if (a.col_idx[k] < i) {
          ++lower;
        } else {
          ++upper;
          upper_missing += !has_reverse(a, i, k);
        }
      }
    }
    if (upper_missing == 0 && upper == lower) return;

    std::int64_t first_bad = std::numeric_limits<std::int64_t>::max();
#pragma omp parallel for schedule(dynamic, 1024) reduction(min : first_bad) if (parallel)
    for (gidx_t i = 0; i < a.n_rows; ++i) {
      for (std::int64_t k = a.row_ptr[i]; k < a.row_ptr[i + 1]; ++k) {
        if (!has_reverse(a, i, k)) {
          first_bad = std::min(first_bad, i);
          break;
        }
      }
    }
    if (first_bad == std::numeric_limits<std::int64_t>::max()) return;
    const gidx_t i = first_bad;
    for (std::int64_t k = a.row_ptr[i]; k < a.row_ptr[i + 1]; ++k) {
      if (has_reverse(a, i, k)) continue;
      const gidx_t j = a.col_idx[k];
      const auto begin = a.col_idx.begin() + a.row_ptr[j];
      const auto end = a.col_idx.begin() + a.row_ptr[j + 1];
      const auto it = std::lower_bound(begin, end, i);
      const std::string edge = std::to_string(i + 1) + "-" + std::to_string(j + 1);
      if (it == end || *it != i) {
        fail(vertex_line(h, i), "edge " + edge + " has no reverse: vertex " +
                                    std::to_string(j + 1) + " does not list " +
                                    std::to_string(i + 1) + " (the graph must be undirected)");
      }
      fail(vertex_line(h, i), "edge " + edge + " has weight " + shortest(a.values[k]) +
                                  " but its reverse has weight " +
                                  shortest(a.values[it - a.col_idx.begin()]));
    }
  }

  static bool has_reverse(const CsrMatrix& a, gidx_t i, std::int64_t k) {
    const gidx_t j = a.col_idx[k];
    const auto begin = a.col_idx.begin() + a.row_ptr[j];
    const auto end = a.col_idx.begin() + a.row_ptr[j + 1];
    const auto it = std::lower_bound(begin, end, i);
    return it != end && *it == i && a.values[it - a.col_idx.begin()] == a.values[k];
  }

  // The line of 0-based vertex v (a cold path: rescans the file).
  std::int64_t vertex_line(const Header& h, gidx_t v) const {
    LineCursor lines(bytes_);
    const char* b = nullptr;
    const char* e = nullptr;
    while (lines.line() < h.line) lines.next(b, e);
    for (gidx_t k = 0; k <= v; ++k) lines.next_non_comment(b, e);
    return lines.line();
  }

  std::string_view bytes_;
  const std::string& path_;
  std::int64_t total_entries_ = 0;
};

}  // namespace

MetisGraph read_metis_graph(const std::string& path) {
  const InputBytes file(path);
  return MetisParser(file.bytes(), path).parse();
}

MetisGraph parse_metis_graph(std::string_view bytes, const std::string& name) {
  const InputBytes content(bytes, name);
  return MetisParser(content.bytes(), name).parse();
}

}  // namespace netsparse

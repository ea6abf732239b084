// Matrix specification strings (load_distributed_matrix, matrix_spec_help): a file path or a
// generator with its parameters.
#include "netsparse/dist_matrix.hpp"

#include <omp.h>
#include <unistd.h>
#include <array>

#include <algorithm>
#include <charconv>
#include <climits>
#include <cstdint>
#include <cstdio>
#include <iterator>
#include <limits>
#include <stdexcept>
#include <type_traits>
#include <vector>

#include "agreement/mpi_util.hpp"
#include "netsparse/coo.hpp"
#include "netsparse/matrix_market.hpp"
#include "netsparse/metis.hpp"
#include "sparse/csr_part.hpp"
#include "support/enum_names.hpp"

namespace netsparse {

using dist::check_mpi;
using dist::collective_call;

std::string matrix_spec_help() {
  return "  PATH.mtx                                     Matrix Market file (each rank parses\n"
         "                                               a byte range; MPI_Alltoallv to owners)\n"
         "  PATH.graph | PATH.metis                      METIS graph file\n"
         "  PATH (any other name)                        Matrix Market if its content starts\n"
         "                                               with %%MatrixMarket, else METIS\n"
         "                                               (gzip-compressed files are read too)\n"
         "  gen:kron:SCALE[:EDGE_FACTOR[:SEED]]          Graph500 Kronecker, 2^SCALE rows,\n"
         "                                               edge factor 16, seed 1 by default\n"
         "  gen:stencil:NX:NY:NZ[:DOF]                   3D 27-point stencil, DOF 1 default\n"
         "  gen:road:WIDTH:HEIGHT[:LONG_FRACTION[:SEED[:GRID_FRACTION]]]\n"
         "                                               road-like grid + long edges (0.01),\n"
         "                                               each grid edge kept with GRID_FRACTION\n"
         "                                               (1; europe_osm's 2.1 per row: 0.53)\n"
         "  gen:web:ROWS[:MEAN_DEGREE[:LOCAL_FRACTION[:SEED]]]\n"
         "                                               web crawl in URL order: power-law\n"
         "                                               degrees (28 links drawn a page), 0.9\n"
         "                                               of them near the page, the rest to\n"
         "                                               popular pages anywhere\n";
}

namespace {

std::vector<std::string> split(std::string_view s, char sep) {
  std::vector<std::string> parts;
  std::size_t start = 0;
  for (;;) {
    const std::size_t pos = s.find(sep, start);
    parts.emplace_back(s.substr(start, pos == std::string_view::npos ? s.npos : pos - start));
    if (pos == std::string_view::npos) break;
    start = pos + 1;
  }
  return parts;
}

template <class T>
T parse_number(std::string_view spec, const std::string& field, const char* what) {
  T value{};
  const char* b = field.data();
  const char* e = field.data() + field.size();
  const auto [ptr, ec] = std::from_chars(b, e, value);
  if (field.empty() || ec != std::errc() || ptr != e) {
    throw std::invalid_argument("matrix specification '" + std::string(spec) + "': " + what + " '" +
                                field + "' is not a valid number");
  }
  return value;
}

[[noreturn]] void bad_spec(std::string_view spec, const std::string& why) {
  throw std::invalid_argument("matrix specification '" + std::string(spec) + "': " + why +
                              "\naccepted forms:\n" + matrix_spec_help());
}

// One numeric parameter of a generator specification: its name and where it is parsed into.
template <class T>
struct Param {
  const char* name;
  T& out;
};
template <class T>
Param(const char*, T&) -> Param<T>;

bool ends_with(std::string_view s, std::string_view suffix) {
  return s.size() >= suffix.size() && s.substr(s.size() - suffix.size()) == suffix;
}

}  // namespace

DistMatrix load_distributed_matrix(MPI_Comm comm, std::string_view spec, PartitionKind partition) {
  // First, before a rank parses the specification or reads anything: the ranks agree on it (a
  // generator's whole specification; for a file, that it is one -- the readers agree on its
  // content, which ranks may read from their own copies) and on the partition, so one rank's
  // other matrix fails every rank with one std::invalid_argument instead of an inconsistent
  // matrix or mismatched collectives.
  {
    agreement::Agreement agreed;
    agreed.field("the matrix specification",
                 spec.rfind("gen:", 0) == 0 ? std::string(spec) : std::string("a file"));
    agreed.field("the partition", to_string(partition));
    agreement::agree_on_call(comm, "load_distributed_matrix", std::move(agreed), nullptr);
  }
  if (spec.rfind("gen:", 0) == 0) {
    const std::vector<std::string> f = split(spec, ':');
    const std::string& kind = f.size() > 1 ? f[1] : std::string();
    // The generator's parameters, fields 2, 3, ... of the specification in the order given (each
    // a Param: its name in errors, and where it goes, whose type says how it parses); the first
    // `required` of them must be there, the others keep their defaults when left out.
    const auto params = [&](std::size_t required, auto... given) {
      if (f.size() < 2 + required || f.size() > 2 + sizeof...(given)) {
        bad_spec(spec, "gen:" + kind + " takes " + std::to_string(required) + " to " +
                           std::to_string(sizeof...(given)) + " parameters");
      }
      std::size_t i = 2;
      const auto parse = [&](auto param) {
        if (i < f.size()) {
          param.out =
              parse_number<std::remove_reference_t<decltype(param.out)>>(spec, f[i], param.name);
        }
        ++i;
      };
      (parse(given), ...);
    };
    if (kind == "kron") {
      KroneckerParams p;
      params(1, Param{"SCALE", p.scale}, Param{"EDGE_FACTOR", p.edge_factor},
             Param{"SEED", p.seed});
      if (p.scale < 1 || p.scale > 40) bad_spec(spec, "SCALE must be in [1, 40]");
      if (p.edge_factor < 1) bad_spec(spec, "EDGE_FACTOR must be >= 1");
      return generate_distributed(comm, p, partition);
    }
    if (kind == "stencil") {
      StencilParams p;
      params(3, Param{"NX", p.nx}, Param{"NY", p.ny}, Param{"NZ", p.nz}, Param{"DOF", p.dof});
      if (p.nx < 1 || p.ny < 1 || p.nz < 1 || p.dof < 1) bad_spec(spec, "sizes must be >= 1");
      return generate_distributed(comm, p, partition);
    }
    if (kind == "road") {
      RoadParams p;
      params(2, Param{"WIDTH", p.width}, Param{"HEIGHT", p.height},
             Param{"LONG_FRACTION", p.long_edge_fraction}, Param{"SEED", p.seed},
             Param{"GRID_FRACTION", p.grid_edge_fraction});
      if (p.width < 1 || p.height < 1) bad_spec(spec, "sizes must be >= 1");
      if (!(p.long_edge_fraction >= 0 && p.long_edge_fraction <= 1)) {
        bad_spec(spec, "LONG_FRACTION must be in [0, 1]");
      }
      if (!(p.grid_edge_fraction >= 0 && p.grid_edge_fraction <= 1)) {
        bad_spec(spec, "GRID_FRACTION must be in [0, 1]");
      }
      return generate_distributed(comm, p, partition);
    }
    if (kind == "web") {
      WebParams p;
      params(1, Param{"ROWS", p.n}, Param{"MEAN_DEGREE", p.mean_degree},
             Param{"LOCAL_FRACTION", p.local_fraction}, Param{"SEED", p.seed});
      if (p.n < 1) bad_spec(spec, "ROWS must be >= 1");
      if (!(p.mean_degree >= 1 && p.mean_degree <= 10000)) {
        bad_spec(spec, "MEAN_DEGREE must be in [1, 10000]");
      }
      if (!(p.local_fraction >= 0 && p.local_fraction <= 1)) {
        bad_spec(spec, "LOCAL_FRACTION must be in [0, 1]");
      }
      return generate_distributed(comm, p, partition);
    }
    bad_spec(spec, "unknown generator '" + kind + "'");
  }
  const std::string path(spec);
  if (path.empty()) bad_spec(spec, "empty");
  if (ends_with(path, ".graph") || ends_with(path, ".metis")) {
    return read_distributed_metis(comm, path, partition);
  }
  if (ends_with(path, ".mtx")) return read_distributed_matrix_market(comm, path, partition);
  // Any other name (x.mtx.gz, x.graph.gz, x.dat): Matrix Market files announce themselves in
  // their first bytes, looked at after decompression for gzip data.
  const bool is_mm = collective_call(comm, [&] { return is_matrix_market_file(path); });
  return is_mm ? read_distributed_matrix_market(comm, path, partition)
               : read_distributed_metis(comm, path, partition);
}

}  // namespace netsparse

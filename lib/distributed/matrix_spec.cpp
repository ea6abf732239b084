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
#include "netsparse/generator_spec.hpp"
#include "netsparse/matrix_market.hpp"
#include "netsparse/metis.hpp"
#include "sparse/csr_part.hpp"
#include "support/enum_names.hpp"

namespace netsparse {

using dist::check_mpi;
using dist::collective_call;

std::string matrix_spec_help() {
  return std::string(
             "  PATH.mtx                                     Matrix Market file (each rank parses\n"
             "                                               a byte range; MPI_Alltoallv to "
             "owners)\n"
             "  PATH.graph | PATH.metis                      METIS graph file\n"
             "  PATH (any other name)                        Matrix Market if its content starts\n"
             "                                               with %%MatrixMarket, else METIS\n"
             "                                               (gzip-compressed files are read "
             "too)\n") +
         generator_spec_help();
}

namespace {

[[noreturn]] void bad_spec(std::string_view spec, const std::string& why) {
  throw std::invalid_argument("matrix specification '" + std::string(spec) + "': " + why +
                              "\naccepted forms:\n" + matrix_spec_help());
}

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
  if (const std::optional<GeneratorParams> g = parse_generator_spec(spec)) {
    return std::visit([&](const auto& p) { return generate_distributed(comm, p, partition); }, *g);
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

// Building distributed matrices: partitions, the parallel Matrix Market and METIS readers,
// generators (specification strings: matrix_spec.cpp; neighbour sampling: sampling.cpp).
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
#include "support/memory.hpp"

namespace netsparse {

using dist::check_mpi;
using dist::collective_call;

constexpr auto kPartitionKindNames = std::to_array<support::EnumName<PartitionKind>>({
    {PartitionKind::equal_rows, "equal-rows"},
    {PartitionKind::balanced_nnz, "balanced-nnz"},
});

const char* to_string(PartitionKind kind) noexcept {
  return support::name_of<kPartitionKindNames>(kind, "unknown");
}

DistMatrix::DistMatrix(MPI_Comm comm, CsrMatrix local, RowPartition rows, RowPartition cols,
                       std::string name)
    : comm_(comm),
      rank_(dist::comm_rank(comm)),
      nranks_(dist::comm_size(comm)),
      local_(std::move(local)),
      rows_(std::move(rows)),
      cols_(std::move(cols)),
      name_(std::move(name)) {
  // Checked on every rank and agreed on, so a bad block on one rank cannot strand the others
  // in the collective below; the shape and the partitions must be the same on every rank (their
  // digest rides in the same allreduce).
  agreement::Agreement agreed;
  agreed.field("the shape",
               std::to_string(rows_.n_rows()) + " x " + std::to_string(cols_.n_rows()));
  const auto offsets_hash = [](const RowPartition& p) {
    return std::to_string(
        agreement::fnv1a(p.offsets().data(), p.offsets().size() * sizeof(gidx_t)));
  };
  agreed.field("the row partition", offsets_hash(rows_), false);
  agreed.field("the column partition", offsets_hash(cols_), false);
  agreement::collective_call_agreed(comm_, "DistMatrix", std::move(agreed), [&] {
    const auto fail = [&](const std::string& why) {
      throw std::invalid_argument("DistMatrix (rank " + std::to_string(rank_) + "): " + why);
    };
    if (rows_.nparts() != nranks_ || cols_.nparts() != nranks_) {
      fail("the row and column partitions need one part per rank");
    }
    if (local_.n_rows_global != rows_.n_rows() || local_.n_cols != cols_.n_rows()) {
      fail("the local block's shape " + std::to_string(local_.n_rows_global) + " x " +
           std::to_string(local_.n_cols) + " differs from the partitions' " +
           std::to_string(rows_.n_rows()) + " x " + std::to_string(cols_.n_rows()));
    }
    if (local_.row_begin != rows_.begin(rank_) || local_.n_rows != rows_.size(rank_)) {
      fail("the local block holds rows [" + std::to_string(local_.row_begin) + ", " +
           std::to_string(local_.row_end()) + "), the partition gives this rank [" +
           std::to_string(rows_.begin(rank_)) + ", " + std::to_string(rows_.end(rank_)) + ")");
    }
    if (local_.row_ptr.size() != static_cast<std::size_t>(local_.n_rows) + 1 ||
        local_.col_idx.size() != static_cast<std::size_t>(local_.nnz()) ||
        local_.values.size() != static_cast<std::size_t>(local_.nnz())) {
      fail("inconsistent CSR arrays (row_ptr / col_idx / values sizes)");
    }
    // Every column in range and each row's sorted: a kernel's buffers are built from n_cols
    // (a column past it was a heap write outside them in the ghosts' bitmap).
    check_csr(local_, "DistMatrix (rank " + std::to_string(rank_) + ")");
  });
  std::int64_t nnz = local_.nnz();
  check_mpi(MPI_Allreduce(&nnz, &nnz_global_, 1, MPI_INT64_T, MPI_SUM, comm_), "MPI_Allreduce");
}

namespace {

// ---- balanced partition without gathering the row pointer ------------------------------------
// Each rank holds the nonzero counts of the rows of its EQUAL block. Boundary p is the row whose
// global prefix is nearest p * nnz / P, with RowPartition::balanced_by_nnz's tie rule (the first
// prefix >= target, unless the last prefix < target is strictly nearer), so the result equals
// balanced_by_nnz of the whole row pointer.
RowPartition balanced_from_equal_block_counts(MPI_Comm comm, gidx_t n_rows,
                                              const std::vector<std::int64_t>& row_counts) {
  const int nranks = dist::comm_size(comm);
  const RowPartition equal = RowPartition::equal_blocks(n_rows, nranks);
  const int rank = dist::comm_rank(comm);
  const gidx_t eb = equal.begin(rank);
  std::int64_t my_total = 0;
  for (std::int64_t c : row_counts) my_total += c;
  std::int64_t my_offset = 0, total = 0;
  check_mpi(MPI_Exscan(&my_total, &my_offset, 1, MPI_INT64_T, MPI_SUM, comm), "MPI_Exscan");
  if (rank == 0) my_offset = 0;
  check_mpi(MPI_Allreduce(&my_total, &total, 1, MPI_INT64_T, MPI_SUM, comm), "MPI_Allreduce");
  if (total == 0 || nranks == 1) return equal;

  // key = 2 * |prefix - target| + (prefix < target); the smallest key wins. Among rows with the
  // winning key, side 0 takes the smallest row and side 1 the largest: one MIN over +-row.
  const int nb = nranks - 1;
  std::vector<std::int64_t> best_key(nb, std::numeric_limits<std::int64_t>::max());
  std::vector<std::int64_t> best_row(nb, std::numeric_limits<std::int64_t>::max());
  std::vector<std::int64_t> targets(nb);
  for (int p = 1; p < nranks; ++p) {
    targets[p - 1] = static_cast<std::int64_t>(static_cast<__int128>(total) * p / nranks);
  }
  const auto visit = [&](gidx_t row, std::int64_t prefix) {
    for (int b = 0; b < nb; ++b) {
      const std::int64_t t = targets[b];
      const bool below = prefix < t;
      const std::int64_t key = 2 * (below ? t - prefix : prefix - t) + (below ? 1 : 0);
      const std::int64_t signed_row = below ? -row : row;
      if (key < best_key[b] || (key == best_key[b] && signed_row < best_row[b])) {
        best_key[b] = key;
        best_row[b] = signed_row;
      }
    }
  };
  // Only boundaries near a target can win; visiting every boundary of the block costs
  // O(rows * P), fine for the P this runs at, and is obviously correct.
  std::int64_t prefix = my_offset;
  visit(eb, prefix);
  for (std::size_t i = 0; i < row_counts.size(); ++i) {
    prefix += row_counts[i];
    visit(eb + static_cast<gidx_t>(i) + 1, prefix);
  }
  std::vector<std::int64_t> global_key(nb);
  check_mpi(MPI_Allreduce(best_key.data(), global_key.data(), nb, MPI_INT64_T, MPI_MIN, comm),
            "MPI_Allreduce");
  for (int b = 0; b < nb; ++b) {
    if (best_key[b] != global_key[b]) best_row[b] = std::numeric_limits<std::int64_t>::max();
  }
  check_mpi(MPI_Allreduce(MPI_IN_PLACE, best_row.data(), nb, MPI_INT64_T, MPI_MIN, comm),
            "MPI_Allreduce");
  std::vector<gidx_t> offsets(static_cast<std::size_t>(nranks) + 1);
  offsets[0] = 0;
  offsets[nranks] = n_rows;
  for (int p = 1; p < nranks; ++p) {
    const std::int64_t r = best_row[p - 1] < 0 ? -best_row[p - 1] : best_row[p - 1];
    offsets[p] = std::max(offsets[p - 1], r);
  }
  return RowPartition::from_offsets(std::move(offsets));
}

std::vector<std::int64_t> row_counts_of(const CsrMatrix& m) {
  std::vector<std::int64_t> counts(static_cast<std::size_t>(m.n_rows));
  for (gidx_t r = 0; r < m.n_rows; ++r) counts[r] = m.row_ptr[r + 1] - m.row_ptr[r];
  return counts;
}

RowPartition column_partition_for(const RowPartition& rows, gidx_t n_rows, gidx_t n_cols,
                                  int nranks) {
  // B and C split the same way when they can (square A): C of one SpMM is then the B of the
  // next. A rectangular A splits B's rows evenly.
  if (n_rows == n_cols) return rows;
  return RowPartition::equal_blocks(n_cols, nranks);
}

std::string base_name(const std::string& path) {
  const auto slash = path.find_last_of('/');
  return slash == std::string::npos ? path : path.substr(slash + 1);
}

// coo_to_csr of this rank's rows. A header that declares more rows than memory holds is a
// ParseError at the size line (as in the serial reader), refused before allocating: a request
// far beyond physical memory must not reach the allocator (sanitizers abort on it), and
// bad_alloc / length_error from a merely too large one are reported the same way.
CsrMatrix assemble_block(const std::string& path, const MatrixMarketHeader& header,
                         const std::vector<Triplet>& triplets, gidx_t row_begin, gidx_t row_end) {
  const auto too_large = [&] {
    return ParseError(path, header.size_line,
                      "cannot allocate the matrix: this rank's " +
                          std::to_string(row_end - row_begin) + " of the " +
                          std::to_string(header.n_rows) + " rows and " +
                          std::to_string(triplets.size()) + " entries do not fit in memory");
  };
  const long pages = sysconf(_SC_PHYS_PAGES);
  const long page_bytes = sysconf(_SC_PAGE_SIZE);
  if (pages > 0 && page_bytes > 0 &&
      (static_cast<double>(row_end - row_begin) + 1.0) * sizeof(std::int64_t) >
          static_cast<double>(pages) * static_cast<double>(page_bytes)) {
    throw too_large();
  }
  try {
    return coo_to_csr(triplets, header.n_rows, header.n_cols, row_begin, row_end);
  } catch (const std::bad_alloc&) {
  } catch (const std::length_error&) {
  }
  throw too_large();
}

// Sends triplets to the owners of their rows.
std::vector<Triplet> redistribute(MPI_Comm comm, const std::vector<Triplet>& triplets,
                                  const RowPartition& rows) {
  const int nranks = dist::comm_size(comm);
  std::vector<std::vector<Triplet>> send(static_cast<std::size_t>(nranks));
  for (const Triplet& t : triplets) send[rows.owner(t.row)].push_back(t);
  return dist::exchange_all_to_all(comm, send);
}

// Collective, first thing: the generator, its parameters and the partition must be the same on
// every rank (one small allreduce), else every rank throws std::invalid_argument naming them.
void agree_on_generator(MPI_Comm comm, const std::string& generator, PartitionKind partition) {
  agreement::Agreement agreed;
  agreed.field("the generator", generator);
  agreed.field("the partition", to_string(partition));
  agreement::agree_on_call(comm, "generate_distributed", std::move(agreed), nullptr);
}

// The partition must be the same on every rank: agreed with the first collective of a reader.
template <class F>
auto read_agreed(MPI_Comm comm, const char* fn, PartitionKind partition, F&& read) {
  agreement::Agreement agreed;
  agreed.field("the partition", to_string(partition));
  decltype(read()) result{};
  agreement::collective_call_agreed(comm, fn, std::move(agreed), [&] { result = read(); });
  return result;
}

// Refuses (support::OutOfMemory, naming the size) a generated row block that cannot fit: its
// row pointers and at least `min_row_nnz` nonzeros per row (column and value, 16 B each; a lower
// bound, so a refusal is certain). Without it gen:kron:40 ended in a bare std::bad_alloc.
void check_block_memory(const std::string& name, int rank, gidx_t block_rows, double min_row_nnz) {
  const auto rows = static_cast<double>(block_rows);
  const double need = rows * (sizeof(std::int64_t) + min_row_nnz * 16);
  const auto nnz = static_cast<std::uint64_t>(rows * min_row_nnz);
  support::require_memory("generating " + name + " on rank " + std::to_string(rank),
                          need >= 1.8e19 ? UINT64_MAX : static_cast<std::uint64_t>(need),
                          "its block of " + std::to_string(block_rows) +
                              " rows (row pointers and at least " + std::to_string(nnz) +
                              " nonzeros of 16 B)");
}

// Generic generator driver: gen(row_begin, row_end) makes a row block, of at least `min_row_nnz`
// nonzeros per row on average (check_block_memory).
template <class Gen>
DistMatrix generate_with(MPI_Comm comm, gidx_t n, PartitionKind partition, const Gen& gen,
                         std::string name, double min_row_nnz) {
  const int nranks = dist::comm_size(comm);
  const int rank = dist::comm_rank(comm);
  RowPartition rows = RowPartition::equal_blocks(n, nranks);
  CsrMatrix local = collective_call(comm, [&] {
    check_block_memory(name, rank, rows.size(rank), min_row_nnz);
    return gen(rows.begin(rank), rows.end(rank));
  });
  if (partition == PartitionKind::balanced_nnz) {
    rows = balanced_from_equal_block_counts(comm, n, row_counts_of(local));
    local = collective_call(comm, [&] { return gen(rows.begin(rank), rows.end(rank)); });
  }
  RowPartition cols = column_partition_for(rows, n, n, nranks);
  return DistMatrix(comm, std::move(local), std::move(rows), std::move(cols), std::move(name));
}

// What a rank's input is, for the check that every rank reads the same one: its size, a
// checksum (FNV-1a) of its header or content, a description and the path, for the message.
struct InputSignature {
  std::uint64_t bytes = 0;
  std::uint64_t checksum = 0;
  char what[128] = {};
  char path[256] = {};
};

// FNV-1a over the bytes of `values` (a checksum, not a defence against an adversary).
template <class T>
std::uint64_t fnv1a(std::uint64_t h, const T* values, std::size_t count) {
  const auto* p = reinterpret_cast<const unsigned char*>(values);
  for (std::size_t i = 0; i < count * sizeof(T); ++i) h = (h ^ p[i]) * 0x100000001b3ull;
  return h;
}
constexpr std::uint64_t kFnvBasis = 0xcbf29ce484222325ull;

// Collective, before any rank parses further: the ranks' inputs must be the same (same size and
// checksum), else every rank throws the same ParseError naming the first rank whose input
// differs from rank 0's (its file, and both descriptions). Without this, ranks that were given
// different files parse byte ranges of different contents and the error, if any, blames a
// valid file ("too many entries").
void agree_on_input(MPI_Comm comm, const std::string& path, const InputSignature& mine_in) {
  InputSignature mine = mine_in;
  std::snprintf(mine.path, sizeof mine.path, "%s", path.c_str());
  const int nranks = dist::comm_size(comm);
  std::vector<InputSignature> all(static_cast<std::size_t>(nranks));
  check_mpi(MPI_Allgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, comm),
            "MPI_Allgather");
  for (int r = 1; r < nranks; ++r) {
    const InputSignature& a = all[static_cast<std::size_t>(r)];
    if (a.bytes == all[0].bytes && a.checksum == all[0].checksum) continue;
    throw ParseError(a.path, 0,
                     "rank " + std::to_string(r) + "'s input differs from rank 0's (" +
                         all[0].path + "): rank " + std::to_string(r) + " has " + a.what +
                         ", rank 0 has " + all[0].what + "; every rank must read the same file");
  }
}

}  // namespace

DistMatrix read_distributed_matrix_market(MPI_Comm comm, const std::string& path,
                                          PartitionKind partition) {
  const int nranks = dist::comm_size(comm);
  const int rank = dist::comm_rank(comm);
  // Every rank reads the header itself (a few hundred bytes): no broadcast needed, and a
  // header error is met by every rank at once.
  const MatrixMarketHeader header = read_agreed(comm, "read_distributed_matrix_market", partition,
                                                [&] { return read_matrix_market_header(path); });
  {
    InputSignature sig;
    sig.bytes = header.file_size;
    const std::int64_t fields[] = {static_cast<std::int64_t>(header.field),
                                   static_cast<std::int64_t>(header.symmetry),
                                   header.n_rows,
                                   header.n_cols,
                                   header.n_entries,
                                   static_cast<std::int64_t>(header.data_offset)};
    sig.checksum = fnv1a(kFnvBasis, fields, std::size(fields));
    std::snprintf(sig.what, sizeof sig.what, "%llu bytes, %lld x %lld with %lld entries",
                  static_cast<unsigned long long>(header.file_size),
                  static_cast<long long>(header.n_rows), static_cast<long long>(header.n_cols),
                  static_cast<long long>(header.n_entries));
    agree_on_input(comm, path, sig);
  }

  // Byte ranges of the data part, one per rank. A range owns the lines that START in it.
  const std::uint64_t data_bytes = header.file_size - header.data_offset;
  MatrixMarketEntryRange range;
  range.byte_begin = header.data_offset + data_bytes * static_cast<std::uint64_t>(rank) / nranks;
  range.byte_end =
      header.data_offset + data_bytes * (static_cast<std::uint64_t>(rank) + 1) / nranks;
  MatrixMarketChunk chunk =
      collective_call(comm, [&] { return parse_matrix_market_entries(path, header, range); });
  std::int64_t entries = 0;
  check_mpi(MPI_Allreduce(&chunk.n_entries, &entries, 1, MPI_INT64_T, MPI_SUM, comm),
            "MPI_Allreduce");
  collective_call(comm, [&] { check_matrix_market_entry_count(path, header, entries); });

  RowPartition rows = RowPartition::equal_blocks(header.n_rows, nranks);
  std::vector<Triplet> mine = redistribute(comm, chunk.triplets, rows);
  chunk.triplets = {};
  if (partition == PartitionKind::balanced_nnz) {
    // Row counts need the merged duplicates, so assemble the equal block first.
    CsrMatrix block =
        coo_to_csr(mine, header.n_rows, header.n_cols, rows.begin(rank), rows.end(rank));
    rows = balanced_from_equal_block_counts(comm, header.n_rows, row_counts_of(block));
    mine = redistribute(comm, mine, rows);
  }
  CsrMatrix local = collective_call(
      comm, [&] { return assemble_block(path, header, mine, rows.begin(rank), rows.end(rank)); });
  // A pattern is a structure: a repeated entry is still one nonzero of value 1 (as the serial
  // reader does).
  if (header.field == MatrixMarketField::pattern) {
    std::fill(local.values.begin(), local.values.end(), 1.0f);
  }
  RowPartition cols = column_partition_for(rows, header.n_rows, header.n_cols, nranks);
  return DistMatrix(comm, std::move(local), std::move(rows), std::move(cols), base_name(path));
}

DistMatrix read_distributed_metis(MPI_Comm comm, const std::string& path, PartitionKind partition) {
  const int nranks = dist::comm_size(comm);
  const int rank = dist::comm_rank(comm);
  MetisGraph graph = read_agreed(comm, "read_distributed_metis", partition,
                                 [&] { return read_metis_graph(path); });
  const CsrMatrix& whole = graph.adjacency;
  {
    InputSignature sig;
    sig.bytes = static_cast<std::uint64_t>(whole.nnz());
    sig.checksum = fnv1a(fnv1a(fnv1a(kFnvBasis, whole.row_ptr.data(), whole.row_ptr.size()),
                               whole.col_idx.data(), whole.col_idx.size()),
                         whole.values.data(), whole.values.size());
    std::snprintf(sig.what, sizeof sig.what, "a graph of %lld vertices and %lld adjacency entries",
                  static_cast<long long>(whole.n_rows), static_cast<long long>(whole.nnz()));
    agree_on_input(comm, path, sig);
  }
  RowPartition rows = partition == PartitionKind::balanced_nnz
                          ? RowPartition::balanced_by_nnz(whole, nranks)
                          : RowPartition::equal_blocks(whole.n_rows, nranks);
  CsrMatrix local;
  local.n_rows_global = whole.n_rows_global;
  local.n_cols = whole.n_cols;
  local.row_begin = rows.begin(rank);
  local.n_rows = rows.size(rank);
  const std::int64_t first = whole.row_ptr[local.row_begin];
  const std::int64_t last = whole.row_ptr[local.row_end()];
  local.row_ptr.resize(static_cast<std::size_t>(local.n_rows) + 1);
  for (gidx_t r = 0; r <= local.n_rows; ++r) {
    local.row_ptr[r] = whole.row_ptr[local.row_begin + r] - first;
  }
  local.col_idx.assign(whole.col_idx.begin() + first, whole.col_idx.begin() + last);
  local.values.assign(whole.values.begin() + first, whole.values.begin() + last);
  const gidx_t n = whole.n_rows;
  graph = {};
  RowPartition cols = column_partition_for(rows, n, n, nranks);
  return DistMatrix(comm, std::move(local), std::move(rows), std::move(cols), base_name(path));
}

DistMatrix generate_distributed(MPI_Comm comm, const KroneckerParams& params,
                                PartitionKind partition) {
  agree_on_generator(comm,
                     "kron:" + std::to_string(params.scale) + ":" +
                         std::to_string(params.edge_factor) + ":" + std::to_string(params.seed) +
                         ":" + std::to_string(params.a) + ":" + std::to_string(params.b) + ":" +
                         std::to_string(params.c),
                     partition);
  if (params.scale < 1 || params.scale > 40) {
    throw std::invalid_argument("generate_distributed: Kronecker scale must be in [1, 40], got " +
                                std::to_string(params.scale));
  }
  const gidx_t n = gidx_t{1} << params.scale;
  return generate_with(
      comm, n, partition, [&](gidx_t b, gidx_t e) { return generate_kronecker(params, b, e); },
      "kron:" + std::to_string(params.scale),
      // Graph500 draws edge_factor edges per row and stores both directions; duplicates and
      // self-loops take a share that shrinks with the scale (kron:7 keeps ~12 per row at edge
      // factor 16), so half the edge factor is below what is kept wherever the check matters
      // (a small scale's block is a few KiB either way).
      static_cast<double>(params.edge_factor) / 2);
}

DistMatrix generate_distributed(MPI_Comm comm, const StencilParams& params,
                                PartitionKind partition) {
  agree_on_generator(comm,
                     "stencil:" + std::to_string(params.nx) + ":" + std::to_string(params.ny) +
                         ":" + std::to_string(params.nz) + ":" + std::to_string(params.dof),
                     partition);
  if (params.nx < 1 || params.ny < 1 || params.nz < 1 || params.dof < 1) {
    throw std::invalid_argument("generate_distributed: stencil sizes must be positive");
  }
  const gidx_t n = params.nx * params.ny * params.nz * params.dof;
  return generate_with(
      comm, n, partition, [&](gidx_t b, gidx_t e) { return generate_stencil27(params, b, e); },
      "stencil:" + std::to_string(params.nx) + "x" + std::to_string(params.ny) + "x" +
          std::to_string(params.nz) + "x" + std::to_string(params.dof),
      0);  // a stencil's size is its parameters' product: the rows' pointers bound it
}

DistMatrix generate_distributed(MPI_Comm comm, const RoadParams& params, PartitionKind partition) {
  agree_on_generator(comm,
                     "road:" + std::to_string(params.width) + ":" + std::to_string(params.height) +
                         ":" + std::to_string(params.long_edge_fraction) + ":" +
                         std::to_string(params.seed) + ":" +
                         std::to_string(params.grid_edge_fraction),
                     partition);
  if (params.width < 1 || params.height < 1) {
    throw std::invalid_argument("generate_distributed: road grid sizes must be positive");
  }
  const gidx_t n = params.width * params.height;
  return generate_with(
      comm, n, partition, [&](gidx_t b, gidx_t e) { return generate_road(params, b, e); },
      "road:" + std::to_string(params.width) + "x" + std::to_string(params.height), 0);
}

DistMatrix generate_distributed(MPI_Comm comm, const WebParams& params, PartitionKind partition) {
  agree_on_generator(comm,
                     "web:" + std::to_string(params.n) + ":" + std::to_string(params.mean_degree) +
                         ":" + std::to_string(params.local_fraction) + ":" +
                         std::to_string(params.locality_span) + ":" + std::to_string(params.seed),
                     partition);
  if (params.n < 1) throw std::invalid_argument("generate_distributed: web needs n >= 1");
  return generate_with(
      comm, params.n, partition, [&](gidx_t b, gidx_t e) { return generate_web(params, b, e); },
      "web:" + std::to_string(params.n), 0);
}

}  // namespace netsparse

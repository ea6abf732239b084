// What the emulator gathers, and the same thing on real ranks.
//
// netsparse_emulate (one process, virtual time) and netsparse_emulate_mpi (real ranks over the
// MPI transport) build their work from these functions, so that for one matrix, node count,
// property size and ladder step both post the same RIG work requests to engines configured the
// same way, and their per-node counters (NodeTraffic) can be compared line by line.
#pragma once

#include <cstdint>
#include <functional>
#include <iosfwd>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "emulate/cluster.hpp"
#include "netsparse/csr.hpp"
#include "netsparse/netsparse.h"

namespace netsparse::emulate {

// A matrix specification as a function of a row block (any split of the rows gives the same
// matrix): the library's generator forms (parse_generator_spec, netsparse/generator_spec.hpp; a
// SEED left out is `seed`), or the paper's Table 6 matrices by shape:
//   paper:arabic       gen:web:22744080:32:0.9 (22.7 M rows, 638 M nonzeros: arabic-2005 has
//                      22.7 M / 640 M; a crawl in URL order)
//   paper:arabic-kron  gen:kron:24:40 (16.8 M rows, 648 M nonzeros; power-law without locality)
//   paper:europe       gen:road:7150:7150:0.01:SEED:0.53 (51.1 M rows, 108.9 M nonzeros:
//                      europe_osm 50.9 M / 108 M)
//   paper:queen        gen:stencil:111:111:111:3 (4.1 M rows, 81 nonzeros per interior row:
//                      queen_4147 4.1 M / 317 M)
// `block` is empty for anything else (a file). std::invalid_argument with the reason for a
// malformed specification or more than 2^32 rows.
struct MatrixGenerator {
  gidx_t rows = 0;
  std::function<CsrMatrix(gidx_t, gidx_t)> block;
};
MatrixGenerator matrix_generator(const std::string& spec, std::uint64_t seed);

// The whole matrix of a specification (above) or a Matrix Market file. Throws
// (std::invalid_argument, SparseError) with the reason.
CsrMatrix load_matrix_spec(const std::string& spec, std::uint64_t seed);

// gather_workload's work without the whole matrix in memory: a generator's rows are made one
// node's block at a time and only their columns kept (the paper-sized matrices: 8 B a nonzero,
// not 24). row_ptr is the whole matrix's (node p's nonzeros are row_ptr[row_offsets[p]] ..
// row_ptr[row_offsets[p + 1]], in w.idxs[p] from 0). A file is read whole, as before.
struct PatternWorkload {
  Workload w;
  std::vector<std::int64_t> row_ptr;
};
PatternWorkload pattern_workload(const std::string& spec, std::uint64_t seed, int nodes,
                                 std::uint32_t prop_bytes, int ranks_per_node = 1);

// Node p owns the equal row block [rows * p / nodes, rows * (p + 1) / nodes) and asks for the
// column of every nonzero of its rows, in CSR order (repeats and its own rows included: the
// engine filters, coalesces and skips them). std::invalid_argument unless the matrix is square
// with at least one row per rank.
// With ranks_per_node R > 1 the rows are cut into equal blocks per rank (nodes x R ranks) and
// node p is ranks [p R, (p + 1) R): one NIC per host of R ranks (netsparse-node,
// docs/node-aware.md); its list is its ranks' lists in rank order.
Workload gather_workload(const CsrMatrix& a, int nodes, std::uint32_t prop_bytes,
                         int ranks_per_node = 1);

// Fig. 19's partitions of the rows over the nodes: the part (node) of every row.
// Equal rows: gather_workload's blocks. Balanced nonzeros: contiguous blocks cut where the
// running nonzero count crosses p * nnz / nodes (at least one row each). METIS: k-way
// (METIS_PartGraphKway, seeded) on the graph of A + A^T without self-loops, vertex weights =
// row nonzeros + 1, METIS' default 3 % imbalance: the graph partition_with_metis uses on real
// ranks, computed here serially on the whole matrix. std::invalid_argument with the reason
// (too few rows, an empty part, a METIS error).
enum class RowPartition { kEqualRows, kBalancedNnz, kMetis };
const char* partition_name(RowPartition p) noexcept;  // "equal", "nnz", "metis"
std::vector<int> row_parts(const CsrMatrix& a, int nodes, RowPartition how, std::uint64_t seed);

// The matrix renumbered so that node p's rows (part[row] == p, in their order) are the p-th
// block, columns renumbered alike (the gather a distributed SpMM does after that partition);
// `row_offsets` gets the blocks. std::invalid_argument for a bad part or an empty one.
CsrMatrix renumber_by_parts(const CsrMatrix& a, std::span<const int> part, int nodes,
                            std::vector<std::uint64_t>& row_offsets);
// gather_workload for given row blocks (ranks_per_node 1).
Workload block_workload(const CsrMatrix& a, std::vector<std::uint64_t> row_offsets,
                        std::uint32_t prop_bytes);

// The paper's batches give every node 77..291 work requests (Table 6 nnz / 128 nodes / 8k or
// 32k idxs): 2.4..9 per RIG unit, so every unit works. The power of two giving about 4 work
// requests per unit, in [64, 32k].
std::uint32_t auto_batch(std::uint64_t mean_idxs_per_node, int units);

// Table 8's ladder: each step adds one mechanism (engine flags; the ToR switch for the last).
struct LadderStep {
  const char* name;
  std::uint32_t flags;  // NS_CTX_NO_FILTER / NO_COALESCE / NO_CONCAT
  bool tor;             // the ToR switches' concatenation and Property Cache
};
std::span<const LadderStep> ladder() noexcept;
// nullptr for an unknown name.
const LadderStep* find_step(std::string_view name) noexcept;

// The engine attributes of one emulated node (units, packet size, concatenation delay, Pending
// PR Table, idx chunk, flags), INLINE progress, no watchdog.
ns_context_attr node_attr(const NodeModel& model);

// The host's work request number `n` of a node: `batch` idxs from position n * batch of its
// list, INDEXED into the whole column range, remote rows only, the first one opening the Idx
// Filter's epoch. `out` holds total_rows properties of prop_bytes.
ns_send_wr gather_wr(std::uint64_t n, std::span<const std::uint64_t> idxs, std::uint32_t batch,
                     ns_mr* mr, void* out, std::uint64_t total_rows, std::uint32_t prop_bytes);

// One node's traffic as its engine counts it. Every field is fixed by the workload when
// concatenation is off; with coalescing on, filtered + coalesced is (which of the two catches a
// repeat depends on timing); with concatenation on, packets and header bytes depend on timing.
struct NodeTraffic {
  std::uint64_t requested = 0, dropped = 0, local = 0, sent = 0, served = 0;
  std::uint64_t read_packets = 0, response_packets = 0;
  std::uint64_t read_bytes = 0, response_bytes = 0, payload_bytes = 0;
};
NodeTraffic traffic_of(const NodeResult& node);
NodeTraffic traffic_of(const ns_context* ctx);  // from ns_stat_get
// One line per node, "node P: requested ... payload_bytes N", the same text from both programs.
void write_traffic(std::ostream& out, std::span<const NodeTraffic> nodes);

}  // namespace netsparse::emulate

// The MPI collective entry points, counted and forwarded to PMPI (mpi_calls.hpp). Linked into the
// executable itself (not an archive member that might not be pulled in), so its definitions take
// the place of libmpi's for every object of the program.
#include "mpi_calls.hpp"

#include <mpi.h>

#include <execinfo.h>
#include <unistd.h>

#include <atomic>
#include <cstdio>
#include <exception>

#include "config/settings.hpp"

namespace {

std::atomic<std::uint64_t> g_collectives{0};

// NETSPARSE_TRACE_COLLECTIVES=R (lib/config/settings.hpp): world rank R prints the call stack
// and the time (PMPI_Wtime) of each counted collective to stderr (symbolize with addr2line), to
// find where a setup's collectives come from. Read once per process, at the first count (after
// MPI_Init: the counted calls are MPI's).
bool tracing() noexcept {
  static const bool traced = [] {
    try {
      const long long wanted =
          netsparse::config::integer(netsparse::config::Env::kTraceCollectives);
      if (wanted < 0) return false;
      int rank = -1;
      PMPI_Comm_rank(MPI_COMM_WORLD, &rank);
      return rank == wanted;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "netsparse_bench: %s; not tracing collectives\n", e.what());
      return false;
    }
  }();
  return traced;
}

void trace(std::uint64_t n) noexcept {
  void* frames[24];
  const int depth = backtrace(frames, 24);
  std::fprintf(stderr, "== collective %llu at %.6f s\n", static_cast<unsigned long long>(n),
               PMPI_Wtime());
  std::fflush(stderr);
  backtrace_symbols_fd(frames, depth, STDERR_FILENO);
}

void add_one() noexcept {
  const std::uint64_t n = g_collectives.fetch_add(1, std::memory_order_relaxed) + 1;
  if (tracing()) trace(n);
}

// Counts a call on `comm` when it has more than one rank.
void count(MPI_Comm comm) noexcept {
  int size = 1;
  if (comm != MPI_COMM_NULL && PMPI_Comm_size(comm, &size) == MPI_SUCCESS && size > 1) add_one();
}

}  // namespace

namespace netsparse::bench {
std::uint64_t mpi_collective_calls() noexcept {
  return g_collectives.load(std::memory_order_relaxed);
}
}  // namespace netsparse::bench

extern "C" {

int MPI_Barrier(MPI_Comm comm) {
  count(comm);
  return PMPI_Barrier(comm);
}
int MPI_Ibarrier(MPI_Comm comm, MPI_Request* request) {
  count(comm);
  return PMPI_Ibarrier(comm, request);
}
int MPI_Bcast(void* buffer, int n, MPI_Datatype type, int root, MPI_Comm comm) {
  count(comm);
  return PMPI_Bcast(buffer, n, type, root, comm);
}
int MPI_Allreduce(const void* in, void* out, int n, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  count(comm);
  return PMPI_Allreduce(in, out, n, type, op, comm);
}
int MPI_Iallreduce(const void* in, void* out, int n, MPI_Datatype type, MPI_Op op, MPI_Comm comm,
                   MPI_Request* request) {
  count(comm);
  return PMPI_Iallreduce(in, out, n, type, op, comm, request);
}
int MPI_Reduce(const void* in, void* out, int n, MPI_Datatype type, MPI_Op op, int root,
               MPI_Comm comm) {
  count(comm);
  return PMPI_Reduce(in, out, n, type, op, root, comm);
}
int MPI_Allgather(const void* in, int n_in, MPI_Datatype type_in, void* out, int n_out,
                  MPI_Datatype type_out, MPI_Comm comm) {
  count(comm);
  return PMPI_Allgather(in, n_in, type_in, out, n_out, type_out, comm);
}
int MPI_Allgatherv(const void* in, int n_in, MPI_Datatype type_in, void* out, const int counts[],
                   const int displs[], MPI_Datatype type_out, MPI_Comm comm) {
  count(comm);
  return PMPI_Allgatherv(in, n_in, type_in, out, counts, displs, type_out, comm);
}
int MPI_Gather(const void* in, int n_in, MPI_Datatype type_in, void* out, int n_out,
               MPI_Datatype type_out, int root, MPI_Comm comm) {
  count(comm);
  return PMPI_Gather(in, n_in, type_in, out, n_out, type_out, root, comm);
}
int MPI_Gatherv(const void* in, int n_in, MPI_Datatype type_in, void* out, const int counts[],
                const int displs[], MPI_Datatype type_out, int root, MPI_Comm comm) {
  count(comm);
  return PMPI_Gatherv(in, n_in, type_in, out, counts, displs, type_out, root, comm);
}
int MPI_Scatter(const void* in, int n_in, MPI_Datatype type_in, void* out, int n_out,
                MPI_Datatype type_out, int root, MPI_Comm comm) {
  count(comm);
  return PMPI_Scatter(in, n_in, type_in, out, n_out, type_out, root, comm);
}
int MPI_Scatterv(const void* in, const int counts[], const int displs[], MPI_Datatype type_in,
                 void* out, int n_out, MPI_Datatype type_out, int root, MPI_Comm comm) {
  count(comm);
  return PMPI_Scatterv(in, counts, displs, type_in, out, n_out, type_out, root, comm);
}
int MPI_Alltoall(const void* in, int n_in, MPI_Datatype type_in, void* out, int n_out,
                 MPI_Datatype type_out, MPI_Comm comm) {
  count(comm);
  return PMPI_Alltoall(in, n_in, type_in, out, n_out, type_out, comm);
}
int MPI_Alltoallv(const void* in, const int counts_in[], const int displs_in[],
                  MPI_Datatype type_in, void* out, const int counts_out[], const int displs_out[],
                  MPI_Datatype type_out, MPI_Comm comm) {
  count(comm);
  return PMPI_Alltoallv(in, counts_in, displs_in, type_in, out, counts_out, displs_out, type_out,
                        comm);
}
int MPI_Reduce_scatter_block(const void* in, void* out, int n, MPI_Datatype type, MPI_Op op,
                             MPI_Comm comm) {
  count(comm);
  return PMPI_Reduce_scatter_block(in, out, n, type, op, comm);
}
int MPI_Scan(const void* in, void* out, int n, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  count(comm);
  return PMPI_Scan(in, out, n, type, op, comm);
}
int MPI_Exscan(const void* in, void* out, int n, MPI_Datatype type, MPI_Op op, MPI_Comm comm) {
  count(comm);
  return PMPI_Exscan(in, out, n, type, op, comm);
}
int MPI_Comm_dup(MPI_Comm comm, MPI_Comm* out) {
  count(comm);
  return PMPI_Comm_dup(comm, out);
}
int MPI_Comm_split(MPI_Comm comm, int color, int key, MPI_Comm* out) {
  count(comm);
  return PMPI_Comm_split(comm, color, key, out);
}
int MPI_Comm_split_type(MPI_Comm comm, int type, int key, MPI_Info info, MPI_Comm* out) {
  count(comm);
  return PMPI_Comm_split_type(comm, type, key, info, out);
}
int MPI_Win_create(void* base, MPI_Aint bytes, int disp_unit, MPI_Info info, MPI_Comm comm,
                   MPI_Win* win) {
  count(comm);
  return PMPI_Win_create(base, bytes, disp_unit, info, comm, win);
}

int MPI_Iallgather(const void* in, int n_in, MPI_Datatype type_in, void* out, int n_out,
                   MPI_Datatype type_out, MPI_Comm comm, MPI_Request* request) {
  count(comm);
  return PMPI_Iallgather(in, n_in, type_in, out, n_out, type_out, comm, request);
}
int MPI_Iallgatherv(const void* in, int n_in, MPI_Datatype type_in, void* out, const int counts[],
                    const int displs[], MPI_Datatype type_out, MPI_Comm comm,
                    MPI_Request* request) {
  count(comm);
  return PMPI_Iallgatherv(in, n_in, type_in, out, counts, displs, type_out, comm, request);
}
int MPI_Win_allocate_shared(MPI_Aint bytes, int disp_unit, MPI_Info info, MPI_Comm comm, void* base,
                            MPI_Win* win) {
  count(comm);
  return PMPI_Win_allocate_shared(bytes, disp_unit, info, comm, base, win);
}
int MPI_Win_allocate(MPI_Aint bytes, int disp_unit, MPI_Info info, MPI_Comm comm, void* base,
                     MPI_Win* win) {
  count(comm);
  return PMPI_Win_allocate(bytes, disp_unit, info, comm, base, win);
}
int MPI_Win_free(MPI_Win* win) {
  MPI_Group group = MPI_GROUP_NULL;
  int size = 1;
  // Collective over the window's group.
  if (win != nullptr && *win != MPI_WIN_NULL && PMPI_Win_get_group(*win, &group) == MPI_SUCCESS) {
    PMPI_Group_size(group, &size);
    PMPI_Group_free(&group);
    if (size > 1) add_one();
  }
  return PMPI_Win_free(win);
}
// Neighbourhood exchanges (MPI_Ineighbor_alltoallv, inspector-executor's run) are not counted:
// they are point-to-point among the graph's neighbours, not a step every rank of the job waits
// on; the graph's creation is.
int MPI_Dist_graph_create_adjacent(MPI_Comm comm, int n_in, const int sources[],
                                   const int source_weights[], int n_out, const int dests[],
                                   const int dest_weights[], MPI_Info info, int reorder,
                                   MPI_Comm* graph) {
  count(comm);
  return PMPI_Dist_graph_create_adjacent(comm, n_in, sources, source_weights, n_out, dests,
                                         dest_weights, info, reorder, graph);
}

}  // extern "C"

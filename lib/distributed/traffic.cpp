// The two denominators of every traffic figure: the minimum traffic of a pattern (priced with
// the one wire model, concat/wire_model.hpp) and the line rate (one definition, used by
// netsparse_bench and bench_index_gather alike).
#include <algorithm>
#include <cstddef>
#include <vector>

#include "agreement/mpi_util.hpp"
#include "concat/wire_model.hpp"
#include "netsparse/distributed.hpp"

namespace netsparse {

using dist::check_mpi;

MinimumTraffic minimum_traffic(const DistKernel& kernel, std::uint32_t packet_bytes) {
  const PatternVolume volume = kernel.volume();
  const auto prop = static_cast<std::uint32_t>(scalar_bytes(kernel.scalar()) * kernel.k());
  MinimumTraffic m;
  for (const std::uint64_t u : volume.unique_remote_per_owner) {  // 0 for this rank itself
    const concat::Traffic t = concat::minimum_traffic(u, prop, packet_bytes);
    m.property_bytes += t.property_bytes;
    m.wire_bytes += t.wire_bytes;
    m.packets += t.packets;
  }
  return m;
}

// The line rate is what one rank can send while EVERY rank sends and receives at once: rank r
// streams `bytes` to (r + P/2) mod P and receives as much from (r - P/2) mod P, all ranks
// together; the rate is `bytes` over the slowest rank's time, best of `reps` after a warm-up.
//
// Why this definition and not a 0 <-> P-1 ping-pong: the figures divided by it (goodput, line
// utilization) are bytes per second per rank measured while all ranks communicate in both
// directions, so the denominator is measured under that same load. A ping-pong keeps one
// direction of one pair busy at a time; when ranks share a NIC or a memory system (several
// ranks per node, shared memory) it overstates what each rank gets and caps utilization below
// 100 %. The shift by P/2 (rather than a rank ^ 1 partner) sends every stream across the halves
// of the job: with ranks placed by node, across the network whenever there are two nodes or
// more; for odd P every rank still sends one stream and receives one.
double measure_line_rate(MPI_Comm comm, std::size_t bytes, int reps) {
  const int rank = dist::comm_rank(comm);
  const int nranks = dist::comm_size(comm);
  double rate = 0;
  if (nranks > 1 && bytes > 0 && reps > 0) {
    const int shift = nranks / 2;
    const int to = (rank + shift) % nranks;
    const int from = (rank - shift + nranks) % nranks;
    const int count = dist::to_mpi_count(bytes, "measure_line_rate");
    std::vector<std::byte> send(bytes, std::byte{1}), recv(bytes);
    double best = 1e30;
    for (int rep = 0; rep <= reps; ++rep) {  // rep 0 warms up (registration, page faults)
      check_mpi(MPI_Barrier(comm), "MPI_Barrier");
      const double t0 = MPI_Wtime();
      MPI_Request req[2];
      check_mpi(MPI_Irecv(recv.data(), count, MPI_BYTE, from, 7, comm, &req[0]), "MPI_Irecv");
      check_mpi(MPI_Isend(send.data(), count, MPI_BYTE, to, 7, comm, &req[1]), "MPI_Isend");
      check_mpi(MPI_Waitall(2, req, MPI_STATUSES_IGNORE), "MPI_Waitall");
      double dt = MPI_Wtime() - t0;
      check_mpi(MPI_Allreduce(MPI_IN_PLACE, &dt, 1, MPI_DOUBLE, MPI_MAX, comm), "MPI_Allreduce");
      if (rep > 0) best = std::min(best, dt);
    }
    rate = static_cast<double>(bytes) / best;
  }
  return rate;  // the same on every rank (best of the same maxima)
}

}  // namespace netsparse

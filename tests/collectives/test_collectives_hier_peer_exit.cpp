// A rank that EXITS in the middle of a hierarchical allreduce (no teardown, no MPI_Finalize):
// every survivor of every host must get an error from the same call within the deadlines (its
// host step's, the leaders' step's, the broadcast down's: at most three in a row) -- never a
// hang or a fake success. Like test_collectives_peer_exit.cpp (plain main, run under
// orte_enable_recovery, the verdict line decides), on virtual hosts (NETSPARSE_RANKS_PER_HOST).
// Arguments: the deadline in ms; "member" (the last rank, not a leader, exits in its host step)
// or "leader" (the last host's leader exits in the leaders' step); "dense" or "sparse".
#include <mpi.h>
#include <unistd.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <numeric>
#include <stdexcept>
#include <string>
#include <vector>

#include "collectives/fault_injection.hpp"
#include "collectives/hierarchical_mpi.hpp"
#include "mpi_test_util.hpp"

namespace cl = netsparse::collectives;
namespace tr = netsparse::transport;

int main(int argc, char** argv) {
  int provided = 0, rank = 0, size = 0;
  MPI_Init_thread(&argc, &argv, MPI_THREAD_SINGLE, &provided);
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const int timeout_ms = argc > 1 ? std::atoi(argv[1]) : 5000;
  const std::string who = argc > 2 ? argv[2] : "member";
  const std::string kind = argc > 3 ? argv[3] : "dense";
  netsparse::dist::Topology topo = netsparse::dist::Topology::build(MPI_COMM_WORLD);
  if (topo.nhosts() < 2 || topo.ranks_of(topo.nhosts() - 1).size() < 2) {
    std::fprintf(stderr, "hier_peer_exit: FAIL (needs >= 2 hosts of >= 2 ranks)\n");
    MPI_Abort(MPI_COMM_WORLD, 2);
  }
  const int victim = who == "leader" ? topo.leader_of(topo.nhosts() - 1) : size - 1;
  MPI_Comm survivors = MPI_COMM_NULL;
  MPI_Comm_split(MPI_COMM_WORLD, rank == victim ? MPI_UNDEFINED : 0, rank, &survivors);
  cl::Options o;
  o.timeout_ms = timeout_ms;
  o.packet_bytes = 4096;
  // The victim exits in the middle of the data of the step named: the host's or the leaders'.
  const auto wrap = [&](std::unique_ptr<tr::Transport> t, bool inter_host) {
    cl::FaultOptions f;
    if (rank == victim && inter_host == (who == "leader")) f.exit_before_send = 40;
    return std::unique_ptr<tr::Transport>(
        std::make_unique<cl::FaultInjectingTransport>(std::move(t), f));
  };
  auto hier = cl::make_hierarchy(topo, tr::TransportKind::kMpi, o, wrap);
  const std::uint64_t count = 1 << 18;  // 1 MiB of fp32
  std::vector<float> x(count, 1.0f), y(count);
  std::vector<std::uint64_t> idx(count / 2);
  std::iota(idx.begin(), idx.end(), std::uint64_t{0});
  for (auto& i : idx) i *= 2;
  const auto call = [&] {
    if (kind == "sparse") {
      cl::SparseArgs s;
      s.n = count;
      s.nnz = idx.size();
      s.idx = idx.data();
      s.values = x.data();
      hier->sparse_allreduce(s);
    } else {
      cl::AllreduceArgs a;
      a.send = x.data();
      a.recv = y.data();
      a.count = count;
      a.dtype = static_cast<int>(cl::DataType::kFp32);
      a.op = static_cast<int>(cl::ReduceOp::kSum);
      hier->allreduce(a);
    }
  };
  int failures = 0;
  const auto t0 = std::chrono::steady_clock::now();
  std::string outcome;
  try {
    call();
    outcome = "succeeded";
    ++failures;  // the victim's contribution never arrived: success would be a lie
  } catch (const cl::CollectiveError& e) {
    outcome = e.what();
  }
  const long long ms =
      std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - t0)
          .count();
  // Three deadlines in a row at most (host step, leaders' step, broadcast down), plus slack.
  if (ms > 3LL * timeout_ms + 2000) ++failures;
  std::printf("[rank %d] hierarchical %s allreduce with a dying %s: %s after %lld ms\n", rank,
              kind.c_str(), who.c_str(), outcome.c_str(), ms);
  std::fflush(stdout);
  netsparse::test::print_survivors_verdict("hier_peer_exit", failures, size, survivors);
  // The transports' teardown would wait for the dead rank: the result is reported, leave.
  _exit(failures == 0 ? 0 : 1);
}

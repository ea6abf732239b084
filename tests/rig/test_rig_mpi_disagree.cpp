// Ranks that disagree on what decides ns_open_mpi's collectives (issue 21.1): one setting, given
// by an attribute or an environment variable on some ranks only, must make ns_open_mpi fail on
// EVERY rank with the same status and the same message naming the setting and a rank, before
// any rank enters a collective the others do not (the failure this guards against is a hang:
// one rank in MPI_Comm_split_type, another in MPI_Comm_dup).
//
// Usage: test_rig_mpi_disagree CASE|all. The environment is changed by the program itself
// (setenv before ns_open_mpi), so one mpirun line gives different ranks different values. For
// each case (`all`: every case in turn, in one launch) rank 0 prints "disagree CASE: PASS" when
// every rank saw the expected failure and a context with the same settings everywhere then
// opened (the refusal left nothing behind), else "disagree CASE: FAIL"; with `all` it ends with
// "disagree all: PASS" only when every case passed (ctest matches these lines). An alarm per
// case turns a hang into "disagree CASE: FAIL (hang)" and exit code 4.
#include <mpi.h>
#include <unistd.h>

#include <csignal>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <string>
#include <vector>

#include "mpi_test_util.hpp"
#include "netsparse/netsparse_mpi.h"

namespace {

constexpr unsigned kHangGuardS = 40;  // generous: CI shares two cores; not a timing assertion
const char* g_case = "";

void on_alarm(int) {
  char line[160];
  const int n = std::snprintf(line, sizeof line, "disagree %s: FAIL (hang)\n", g_case);
  if (n > 0) (void)!write(2, line, static_cast<std::size_t>(n));
  _exit(4);
}

struct Case {
  const char* name;
  // Applies this rank's setting (rank r of size ranks); `last` marks the odd one out.
  void (*apply)(int rank, int size, ns_context_attr& attr);
  const char* expect;  // a substring every rank's message must contain
};

bool odd_one(int rank, int size) {
  return rank == size - 1;
}

const Case kCases[] = {
    {"progress",
     [](int r, int s, ns_context_attr& a) {
       a.comp_mask |= NS_CTX_ATTR_PROGRESS;
       a.progress_mode = odd_one(r, s) ? NS_PROGRESS_INLINE : NS_PROGRESS_AUTO;
     },
     "progress_mode"},
    {"transport_attr",
     [](int r, int s, ns_context_attr& a) {
       a.comp_mask |= NS_CTX_ATTR_TRANSPORT;
       a.transport = odd_one(r, s) ? NS_TRANSPORT_INPROC : NS_TRANSPORT_MPI;
     },
     "transport"},
    {"transport_env",
     [](int r, int s, ns_context_attr&) {
       setenv("NETSPARSE_TRANSPORT", odd_one(r, s) ? "inproc" : "mpi", 1);
     },
     "NETSPARSE_TRANSPORT"},
    {"verbs_missing",  // a rank-local refusal (no RDMA device here) must stop every rank
     [](int r, int s, ns_context_attr&) {
       setenv("NETSPARSE_TRANSPORT", odd_one(r, s) ? "verbs" : "mpi", 1);
     },
     "rank "},
    {"mpi_shm",
     [](int r, int s, ns_context_attr&) {
       setenv("NETSPARSE_TRANSPORT", "mpi", 1);
       setenv("NETSPARSE_MPI_SHM", odd_one(r, s) ? "0" : "1", 1);
     },
     "NETSPARSE_MPI_SHM"},
    {"mpi_reads",
     [](int r, int s, ns_context_attr&) {
       setenv("NETSPARSE_TRANSPORT", "mpi", 1);
       setenv("NETSPARSE_MPI_READS", odd_one(r, s) ? "messages" : "auto", 1);
     },
     "NETSPARSE_MPI_READS"},
    {"message_bytes",
     [](int r, int s, ns_context_attr&) {
       setenv("NETSPARSE_TRANSPORT", "mpi", 1);
       setenv("NETSPARSE_MPI_MESSAGE_BYTES", odd_one(r, s) ? "4096" : "65536", 1);
     },
     "NETSPARSE_MPI_MESSAGE_BYTES"},
    {"bad_env",  // a malformed value on one rank only
     [](int r, int s, ns_context_attr&) {
       setenv("NETSPARSE_TRANSPORT", "mpi", 1);
       if (odd_one(r, s)) setenv("NETSPARSE_MPI_READS", "sideways", 1);
     },
     "NETSPARSE_MPI_READS"},
    {"packet_bytes",
     [](int r, int s, ns_context_attr& a) {
       a.comp_mask |= NS_CTX_ATTR_PACKET;
       a.packet_bytes = odd_one(r, s) ? 4096 : 1500;
     },
     "packet_bytes"},
};

// One case on every rank: the number of failed checks summed over the ranks (0: passed). Rank 0
// prints the case's verdict line.
int run_case(const Case& c, int rank, int size) {
  g_case = c.name;
  alarm(kHangGuardS);

  ns_context_attr attr{};
  c.apply(rank, size, attr);
  ns_context* ctx = nullptr;
  const ns_status_t st = ns_open_mpi(MPI_COMM_WORLD, &attr, &ctx);
  std::string mine = ns_last_error();
  int failures = 0;
  if (st == NS_OK) {
    std::fprintf(stderr, "[rank %d] %s: ns_open_mpi succeeded although ranks disagree\n", rank,
                 c.name);
    ++failures;
    ns_close(ctx);
  } else if (mine.find(c.expect) == std::string::npos || mine.find("rank ") == std::string::npos) {
    std::fprintf(stderr, "[rank %d] %s: message does not name '%s' and a rank: %s\n", rank, c.name,
                 c.expect, mine.c_str());
    ++failures;
  }
  // Same status and same text on every rank.
  char text[1024] = {};
  std::snprintf(text, sizeof text, "%d %s", static_cast<int>(st), mine.c_str());
  char root_text[1024] = {};
  if (rank == 0) std::memcpy(root_text, text, sizeof text);
  MPI_Bcast(root_text, sizeof root_text, MPI_CHAR, 0, MPI_COMM_WORLD);
  if (std::strcmp(text, root_text) != 0) {
    std::fprintf(stderr,
                 "[rank %d] %s: status/message differ from rank 0's:\n  mine: %s\n  0's: %s\n",
                 rank, c.name, text, root_text);
    ++failures;
  }
  if (rank == 0) std::printf("[rank 0] %s refused: %s\n", c.name, text);

  // The refusal left nothing half-done: the same settings everywhere open a context.
  unsetenv("NETSPARSE_TRANSPORT");
  unsetenv("NETSPARSE_MPI_SHM");
  unsetenv("NETSPARSE_MPI_READS");
  unsetenv("NETSPARSE_MPI_MESSAGE_BYTES");
  ns_context_attr same{};
  same.comp_mask = NS_CTX_ATTR_PROGRESS | NS_CTX_ATTR_TRANSPORT;
  same.progress_mode = NS_PROGRESS_INLINE;
  same.transport = NS_TRANSPORT_MPI;
  if (ns_open_mpi(MPI_COMM_WORLD, &same, &ctx) != NS_OK) {
    std::fprintf(stderr, "[rank %d] %s: agreeing ranks cannot open: %s\n", rank, c.name,
                 ns_last_error());
    ++failures;
  } else if (ns_close(ctx) != NS_OK) {
    std::fprintf(stderr, "[rank %d] %s: ns_close: %s\n", rank, c.name, ns_last_error());
    ++failures;
  }
  int total = 0;
  MPI_Allreduce(&failures, &total, 1, MPI_INT, MPI_SUM, MPI_COMM_WORLD);
  alarm(0);
  if (rank == 0) std::printf("disagree %s: %s\n", c.name, total == 0 ? "PASS" : "FAIL");
  std::fflush(stdout);
  return total;
}

}  // namespace

int main(int argc, char** argv) {
  const netsparse::test::World world = netsparse::test::init_world(argc, argv);
  const int rank = world.rank, size = world.size;
  const bool all = argc > 1 && std::strcmp(argv[1], "all") == 0;
  std::vector<const Case*> cases;
  for (const Case& k : kCases) {
    if (all || (argc > 1 && std::strcmp(argv[1], k.name) == 0)) cases.push_back(&k);
  }
  if (cases.empty()) {
    if (rank == 0) std::fprintf(stderr, "usage: %s CASE|all (unknown case)\n", argv[0]);
    MPI_Finalize();
    return 2;
  }
  std::signal(SIGALRM, on_alarm);
  int failed_cases = 0;
  for (const Case* c : cases) failed_cases += run_case(*c, rank, size) != 0 ? 1 : 0;
  MPI_Finalize();
  if (all && rank == 0) {
    std::printf("disagree all: %s (%zu cases, %d failed)\n", failed_cases == 0 ? "PASS" : "FAIL",
                cases.size(), failed_cases);
  }
  return failed_cases == 0 ? 0 : 1;
}

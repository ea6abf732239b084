// Memory needs estimated before anything is allocated (issue 37 item 4): a DistKernel whose
// operand rows cannot fit and a context whose tables and buffers cannot fit are refused on every
// rank with a std::bad_alloc / NS_ERR_NO_MEMORY naming the size and what it is for, nothing
// half-built: an agreed kernel or context right after works. The shortage is real (an absurd K)
// or made with a lowered RLIMIT_DATA on one rank only (the others have the memory and must
// still refuse, with that rank's message).
#include <gtest/gtest.h>
#include <mpi.h>
#include <sys/resource.h>

#include <algorithm>
#include <cstdint>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <vector>

#include "dist_test_util.hpp"
#include "netsparse/dist_matrix.hpp"
#include "netsparse/distributed.hpp"
#include "netsparse/netsparse_mpi.h"

// GCC says __SANITIZE_*__, Clang __has_feature(*_sanitizer): a sanitizer's shadow memory counts
// as data, so a lowered RLIMIT_DATA would fail every later mapping of the process.
#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define NETSPARSE_TEST_SANITIZED 1
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define NETSPARSE_TEST_SANITIZED 1
#endif
#endif

namespace netsparse::test {
namespace {

const Fixture& kron() {
  static const Fixture f = make_fixture("gen:kron:7");
  return f;
}

bool is_last_rank() {
  return world_rank() == world_size() - 1;
}

// What constructing the kernel threw: a std::bad_alloc's what(), else a marker.
template <class F>
std::string bad_alloc_message(F&& f) {
  try {
    f();
  } catch (const std::bad_alloc& e) {
    return e.what();
  } catch (const std::exception& e) {
    return std::string("(wrong exception type) ") + e.what();
  }
  return "(no exception)";
}

// Every rank's message holds every one of `parts`.
void expect_named_everywhere(const std::string& message, const std::vector<std::string>& parts,
                             const std::string& where) {
  bool named = true;
  for (const std::string& p : parts) named = named && message.find(p) != std::string::npos;
  EXPECT_TRUE(named) << where << ": rank " << world_rank() << " got: " << message;
  EXPECT_TRUE(all_ranks(named)) << where << ": not every rank named the size";
}

// RLIMIT_DATA's soft limit lowered to `bytes` while alive (on the ranks that make one).
class DataLimit {
 public:
  explicit DataLimit(rlim_t bytes) {
    getrlimit(RLIMIT_DATA, &saved_);
    rlimit lowered = saved_;
    lowered.rlim_cur = std::min<rlim_t>(bytes, saved_.rlim_max);
    EXPECT_EQ(setrlimit(RLIMIT_DATA, &lowered), 0);
  }
  ~DataLimit() { setrlimit(RLIMIT_DATA, &saved_); }
  DataLimit(const DataLimit&) = delete;
  DataLimit& operator=(const DataLimit&) = delete;

 private:
  rlimit saved_{};
};

// The distinct columns of this rank's rows outside its own block (the operand rows a
// non-replicating mode holds).
std::uint64_t remote_columns(const DistMatrix& dm) {
  const gidx_t lo = dm.cols().begin(dm.rank()), hi = dm.cols().end(dm.rank());
  std::vector<gidx_t> cols;
  for (const gidx_t c : dm.local().col_idx)
    if (c < lo || c >= hi) cols.push_back(c);
  std::sort(cols.begin(), cols.end());
  return static_cast<std::uint64_t>(std::unique(cols.begin(), cols.end()) - cols.begin());
}

// An agreed spmm on a kernel of `mode` computes the reference product.
void expect_agreed_kernel_works(CommMode mode, const std::string& where) {
  const Fixture& f = kron();
  constexpr int kK = 4;
  DistOptions o;
  o.mode = mode;
  DistKernel kern(f.dm, KernelKind::spmm, kK, o, uses_rig_engine(mode) ? shared_engine() : nullptr);
  const int r = world_rank();
  const std::vector<float> b = operand_block(1, f.dm.cols().begin(r), f.dm.cols().end(r), kK);
  std::vector<float> c(static_cast<std::size_t>(f.dm.rows().size(r)) * kK, -7.0f);
  if (mode == CommMode::ideal) kern.replicate(b);
  kern.spmm(b, c);
  EXPECT_LE(max_relative_error(c, reference_spmm(f.dm.local(), kK, 1)), kTolerance) << where;
}

// K = 2^30 in fp64: 8 GiB per operand row, and every rank holds dozens of other ranks' rows.
TEST(MemoryEstimate, AbsurdKIsRefusedNamingTheSizeInEveryMode) {
  const Fixture& f = kron();
  constexpr int kAbsurdK = 1 << 30;
  for (const CommMode mode :
       {CommMode::inspector_executor, CommMode::su, CommMode::ideal, CommMode::netsparse,
        CommMode::sa_conveyors, CommMode::task_packets}) {
    const std::string where = to_string(mode);
    DistOptions o;
    o.mode = mode;
    o.scalar = ScalarType::f64;
    const std::string message = bad_alloc_message([&] {
      DistKernel kern(f.dm, KernelKind::spmm, kAbsurdK, o,
                      uses_rig_engine(mode) ? shared_engine() : nullptr);
    });
    expect_named_everywhere(message,
                            {"needs ", " bytes (", "for the operand rows it holds",
                             "x K 1073741824 x 8 B", "available (MemAvailable"},
                            where);
    if (mode == CommMode::su || mode == CommMode::ideal) {
      EXPECT_NE(message.find("(128 rows x K"), std::string::npos) << where << ": " << message;
    }
    expect_agreed_kernel_works(mode, where);
  }
}

// Only the last rank is short of memory (RLIMIT_DATA 1 GiB; its kernel needs 2 GiB): every rank
// throws that rank's std::bad_alloc, naming RLIMIT_DATA, and the next kernel works.
TEST(MemoryEstimate, OneRankShortRefusesEveryRank) {
#ifdef NETSPARSE_TEST_SANITIZED
  GTEST_SKIP() << "sanitizer runtimes map more than the RLIMIT_DATA this test sets";
#endif
  const Fixture& f = kron();
  std::uint64_t rows = remote_columns(f.dm);
  MPI_Bcast(&rows, 1, MPI_UINT64_T, world_size() - 1, MPI_COMM_WORLD);
  ASSERT_GT(rows, 0u);
  const int k = static_cast<int>((std::uint64_t{2} << 30) / (rows * sizeof(double)) + 1);
  DistOptions o;
  o.mode = CommMode::inspector_executor;
  o.scalar = ScalarType::f64;
  std::string message;
  {
    std::unique_ptr<DataLimit> limit;
    if (is_last_rank()) limit = std::make_unique<DataLimit>(rlim_t{1} << 30);
    message = bad_alloc_message([&] { DistKernel kern(f.dm, KernelKind::spmm, k, o); });
  }
  expect_named_everywhere(message,
                          {"DistKernel on rank " + std::to_string(world_size() - 1) + " needs ",
                           "(" + std::to_string(rows) + " rows x K " + std::to_string(k),
                           "1073741824 bytes (1.0 GiB) available (RLIMIT_DATA"},
                          "one rank short");
  expect_agreed_kernel_works(CommMode::inspector_executor, "after one rank short");
}

// gen:kron:40 (inside the accepted scales): 2^40 rows cannot be generated here; every rank
// throws the std::bad_alloc naming its block's size (it ended in a bare std::bad_alloc), and a
// matrix loads right after.
TEST(MemoryEstimate, GeneratorBeyondTheMemoryIsRefusedNamingTheSize) {
  const std::string message =
      bad_alloc_message([] { (void)load_distributed_matrix(MPI_COMM_WORLD, "gen:kron:40"); });
  expect_named_everywhere(message,
                          {"generating kron:40 on rank ", " needs ", "for its block of ",
                           " rows (row pointers and at least ", "available ("},
                          "gen:kron:40");
  const DistMatrix after = load_distributed_matrix(MPI_COMM_WORLD, "gen:kron:7");
  EXPECT_EQ(after.n_rows(), 128);
}

// A context whose engine tables (256 client units x 2^20 Pending PR Table entries x 28 B, 7.5
// GiB) pass the budget (NETSPARSE_MAX_CONTEXT_BYTES raised) but not the last rank's memory: every
// rank's ns_open_mpi returns NS_ERR_NO_MEMORY with that rank's reason, and a default context
// opens right after.
TEST(MemoryEstimate, ContextTablesBeyondTheMemoryAreRefusedEverywhere) {
#ifdef NETSPARSE_TEST_SANITIZED
  GTEST_SKIP() << "sanitizer runtimes map more than the RLIMIT_DATA this test sets";
#endif
  ASSERT_EQ(setenv("NETSPARSE_MAX_CONTEXT_BYTES", "4611686018427387904", 1), 0);
  ns_context_attr attr{};
  attr.comp_mask = NS_CTX_ATTR_UNITS | NS_CTX_ATTR_PENDING;
  attr.num_client_units = 256;
  attr.num_server_units = 2;
  attr.pending_entries = 1 << 20;
  ns_context* ctx = nullptr;
  ns_status_t s = NS_OK;
  std::string why;
  {
    std::unique_ptr<DataLimit> limit;
    if (is_last_rank()) limit = std::make_unique<DataLimit>(rlim_t{4} << 30);
    s = ns_open_mpi(MPI_COMM_WORLD, &attr, &ctx);
    why = ns_last_error();
  }
  unsetenv("NETSPARSE_MAX_CONTEXT_BYTES");
  EXPECT_EQ(s, NS_ERR_NO_MEMORY) << why;
  EXPECT_EQ(ctx, nullptr);
  if (ctx != nullptr) ns_close(ctx);
  expect_named_everywhere(why,
                          {"the context needs ",
                           "bytes of engine tables (256 client units x "
                           "1048576 Pending PR Table entries x 28 B)",
                           "bytes of transport buffers", "available (RLIMIT_DATA"},
                          "context");
  ns_context* ok = nullptr;
  EXPECT_EQ(ns_open_mpi(MPI_COMM_WORLD, nullptr, &ok), NS_OK) << ns_last_error();
  EXPECT_TRUE(all_ranks(ok != nullptr));
  if (ok != nullptr) {
    EXPECT_EQ(ns_close(ok), NS_OK);
  }
}

}  // namespace
}  // namespace netsparse::test

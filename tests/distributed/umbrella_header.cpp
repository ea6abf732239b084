// <netsparse.hpp> alone is the whole public C++ API: this file includes nothing else of NetSparse
// and touches a name from every header it gathers (compiled with -Werror), then runs a tiny
// distributed SpMV built from CSR arrays under mpirun.
#include <netsparse.hpp>

#include "lsan_mpi.hpp"  // test harness only (LeakSanitizer around MPI), not NetSparse

int main(int argc, char** argv) {
  int provided = 0;
  netsparse::test::lsan_disable();
  MPI_Init_thread(&argc, &argv, MPI_THREAD_MULTIPLE, &provided);
  netsparse::test::lsan_enable();
  int status = 0;
  {
    // One name from every header <netsparse.hpp> gathers.
    static_assert(NETSPARSE_VERSION_MAJOR >= 0);  // config.h
    (void)ns_status_str(NS_OK);                   // netsparse.h
    netsparse::ContextAttr attr;                  // netsparse.hpp
    (void)&netsparse::open_mpi;                   // netsparse_mpi.h
    netsparse::Triplet t{0, 0, 1.0f};             // coo.hpp
    const std::span<const netsparse::Triplet> triplets(&t, 1);
    netsparse::CsrMatrix csr = netsparse::coo_to_csr(triplets, 1, 1);  // csr.hpp
    netsparse::StencilParams stencil;                                  // generators.hpp
    (void)&netsparse::read_matrix_market_header;                       // matrix_market.hpp
    (void)&netsparse::read_metis_graph;                                // metis.hpp
    (void)netsparse::RowPartition::equal_blocks(4, 2);                 // partition.hpp
    netsparse::ParseError parse_error("f", 1, "r");                    // sparse_error.hpp
    netsparse::TileConfig tiles;                                       // tiled.hpp
    (void)sizeof(netsparse::DenseConstView);                           // local_kernels.hpp
    (void)sizeof(netsparse::AutotuneResult);                           // autotune.hpp
    (void)netsparse::to_string(netsparse::PartitionKind::equal_rows);  // dist_matrix.hpp
    (void)netsparse::to_string(netsparse::CommMode::netsparse);        // distributed.hpp
    (void)netsparse::to_string(netsparse::TransposedMethod::push);     // dist_transpose.hpp
    (void)netsparse::to_string(netsparse::SpgemmMode::netsparse);      // spgemm.hpp
    (void)netsparse::ColumnOrder::sort_and_sum;                        // interop.hpp
    (void)attr, (void)csr, (void)stencil, (void)parse_error, (void)tiles;

    // A 4 x 4 tridiagonal matrix given whole on every rank; x = 1 scattered from rank 0.
    const std::vector<std::int64_t> row_ptr = {0, 2, 5, 8, 10};
    const std::vector<std::int64_t> col_idx = {0, 1, 0, 1, 2, 1, 2, 3, 2, 3};
    const std::vector<float> values = {2, -1, -1, 2, -1, -1, 2, -1, -1, 2};
    netsparse::DistMatrix a =
        netsparse::from_global_csr(MPI_COMM_WORLD, 4, 4, {row_ptr, col_idx, values});
    int rank = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &rank);
    const std::vector<float> ones(rank == 0 ? 4 : 0, 1.0f);
    const std::vector<float> x = netsparse::scatter_dense(MPI_COMM_WORLD, a.cols(), 1, ones);
    std::vector<float> y(static_cast<std::size_t>(a.rows().size(rank)));
    netsparse::DistOptions options;
    options.mode = netsparse::CommMode::su;
    netsparse::DistKernel spmv(a, netsparse::KernelKind::spmv, 1, options);
    spmv.spmv(x, y);
    const std::vector<float> y_all = netsparse::allgather_dense(MPI_COMM_WORLD, a.rows(), 1, y);
    if (y_all != std::vector<float>{1, 0, 0, 1}) status = 1;
  }
  netsparse::test::lsan_check_now();
  MPI_Finalize();
  return status;
}

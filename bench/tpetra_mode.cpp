#include "tpetra_mode.hpp"

// Debian's Tpetra is explicitly instantiated (double, int, long long, the Serial node) in
// libtrilinos_tpetra, and its headers declare only (Tpetra_CrsMatrix.hpp includes nothing but
// Tpetra_CrsMatrix_decl.hpp). Still, Teuchos', Kokkos' and Tpetra's declarations make this file
// cost about 11 CPU seconds to compile: no other file includes them.
#include <Teuchos_DefaultMpiComm.hpp>
#include <Tpetra_Core.hpp>
#include <Tpetra_CrsMatrix.hpp>
#include <Tpetra_Distributor.hpp>
#include <Tpetra_Import.hpp>
#include <Tpetra_Map.hpp>
#include <Tpetra_MultiVector.hpp>
#include <Tpetra_Vector.hpp>

#include <stdexcept>
#include <vector>

#include "common/stats.hpp"

namespace netsparse::bench {
namespace {

using matrix_type = Tpetra::CrsMatrix<double>;
using map_type = matrix_type::map_type;
using multivector_type = Tpetra::MultiVector<double>;
using vector_type = Tpetra::Vector<double>;
using global_ordinal = map_type::global_ordinal_type;
using local_ordinal = map_type::local_ordinal_type;

int finalize_tpetra(MPI_Comm, int, void*, void*) {
  Tpetra::finalize();  // Kokkos; not MPI, which the bench initialized
  return MPI_SUCCESS;
}

// Tpetra::initialize once, after the bench's MPI_Init (it then leaves MPI alone); finalized from
// the delete callback of an attribute on MPI_COMM_SELF, i.e. at the start of MPI_Finalize, after
// every Tpetra object of a run is gone. Debian's Kokkos has the Serial backend only: each rank
// computes on one thread whatever OMP_NUM_THREADS says.
void ensure_tpetra() {
  if (Tpetra::isInitialized()) return;
  int argc = 0;
  char** argv = nullptr;
  Tpetra::initialize(&argc, &argv);
  int key = MPI_KEYVAL_INVALID;
  MPI_Comm_create_keyval(MPI_COMM_NULL_COPY_FN, finalize_tpetra, &key, nullptr);
  MPI_Comm_set_attr(MPI_COMM_SELF, key, nullptr);
}

// A duplicate of the bench's communicator for Tpetra's messages, freed after its objects.
struct OwnComm {
  MPI_Comm comm = MPI_COMM_NULL;
  explicit OwnComm(MPI_Comm of) { MPI_Comm_dup(of, &comm); }
  ~OwnComm() { MPI_Comm_free(&comm); }
  OwnComm(const OwnComm&) = delete;
  OwnComm& operator=(const OwnComm&) = delete;
};

// SpMV multiplies Tpetra::Vectors, SpMM MultiVectors of K columns.
Teuchos::RCP<multivector_type> make_operand(KernelKind kernel,
                                            const Teuchos::RCP<const map_type>& map, int k) {
  if (kernel == KernelKind::spmv) return Teuchos::rcp(new vector_type(map));
  return Teuchos::rcp(new multivector_type(map, static_cast<std::size_t>(k)));
}

// Tpetra stores a multivector column by column; the bench's blocks are row-major.
void copy_rows_in(multivector_type& x, std::span<const double> rows, int k) {
  auto v = x.getLocalViewHost(Tpetra::Access::OverwriteAll);
  const std::size_t n = v.extent(0);
  for (std::size_t i = 0; i < n; ++i) {
    for (int j = 0; j < k; ++j) v(i, j) = rows[i * k + j];
  }
}

std::vector<double> copy_rows_out(const multivector_type& y, int k) {
  const auto v = y.getLocalViewHost(Tpetra::Access::ReadOnly);
  const std::size_t n = v.extent(0);
  std::vector<double> out(n * k);
  for (std::size_t i = 0; i < n; ++i) {
    for (int j = 0; j < k; ++j) out[i * k + j] = v(i, j);
  }
  return out;
}

}  // namespace

BaselineRun run_tpetra(const DistMatrix& a, KernelKind kernel, int k,
                       std::span<const double> b_local, int warmup, int iters) {
  if (kernel == KernelKind::sddmm || (kernel == KernelKind::spmv && k != 1)) {
    throw std::invalid_argument("tpetra mode: SpMV and SpMM (CrsMatrix::apply) only");
  }
  ensure_tpetra();
  const int rank = a.rank();
  const CsrMatrix& l = a.local();
  if (b_local.size() != static_cast<std::size_t>(a.cols().size(rank)) * k) {
    throw std::invalid_argument("tpetra mode: the operand block is not this rank's columns x K");
  }
  BaselineRun run;
  const OwnComm own(a.comm());
  {
    const Teuchos::RCP<const Teuchos::Comm<int>> comm =
        Teuchos::rcp(new Teuchos::MpiComm<int>(own.comm));
    MPI_Barrier(own.comm);
    const double t0 = MPI_Wtime();
    // Contiguous maps, rank r holding rows (columns) [begin(r), end(r)): the bench's split. The
    // column map is Tpetra's (fillComplete derives it from the inserted columns).
    const auto row_map = Teuchos::rcp(new map_type(static_cast<global_ordinal>(a.n_rows()),
                                                   static_cast<std::size_t>(l.n_rows), 0, comm));
    const auto domain_map =
        Teuchos::rcp(new map_type(static_cast<global_ordinal>(a.n_cols()),
                                  static_cast<std::size_t>(a.cols().size(rank)), 0, comm));
    std::vector<std::size_t> per_row(static_cast<std::size_t>(l.n_rows));
    for (std::size_t r = 0; r < per_row.size(); ++r) {
      per_row[r] = static_cast<std::size_t>(l.row_ptr[r + 1] - l.row_ptr[r]);
    }
    const std::vector<global_ordinal> cols(l.col_idx.begin(), l.col_idx.end());
    const auto matrix = Teuchos::rcp(new matrix_type(
        row_map, Teuchos::ArrayView<const std::size_t>(per_row.data(), per_row.size())));
    for (std::size_t r = 0; r < per_row.size(); ++r) {
      const std::int64_t begin = l.row_ptr[r];
      matrix->insertGlobalValues(static_cast<global_ordinal>(l.row_begin + r),
                                 static_cast<local_ordinal>(per_row[r]), l.values.data() + begin,
                                 cols.data() + begin);
    }
    matrix->fillComplete(domain_map, row_map);
    const auto x = make_operand(kernel, domain_map, k);
    const auto y = make_operand(kernel, row_map, k);
    copy_rows_in(*x, b_local, k);
    run.setup_seconds = max_over_ranks(MPI_Wtime() - t0, own.comm);

    const auto importer = matrix->getGraph()->getImporter();  // null: no ghosts anywhere
    if (!importer.is_null()) {
      run.ghost_bytes = static_cast<double>(importer->getNumRemoteIDs()) * k * sizeof(double);
      run.ghost_messages = static_cast<double>(importer->getDistributor().getNumReceives());
    }
    for (int i = 0; i < warmup + iters; ++i) {
      MPI_Barrier(own.comm);
      const double s = MPI_Wtime();
      matrix->apply(*x, *y);  // Y = A X: the Import of X's ghosts, then the local product
      const double t = max_over_ranks(MPI_Wtime() - s, own.comm);
      if (i >= warmup) run.times.push_back(t);
    }
    run.out = copy_rows_out(*y, k);
  }
  return run;
}

}  // namespace netsparse::bench

// NetSparse: the whole public API in one include (like <petsc.h> or <Eigen/Eigen>).
//
//   #include <netsparse.hpp>           // everything below; needs <mpi.h> (comes with MPI)
//   #include <netsparse/eigen.hpp>     // optional: DistMatrix from an Eigen::SparseMatrix
//
// Link NetSparse::netsparse (CMake: find_package(NetSparse)) or `pkg-config --libs netsparse`.
// The individual headers stay includable on their own (<netsparse/distributed.hpp>, ...).
// Note the difference with <netsparse/netsparse.hpp>, which holds only the C++ RAII layer over
// the C verbs (Context, Cq, Qp, PropertyRegion).
#pragma once

// Build configuration (version, verbs support).
#include "netsparse/config.h"

// The RIG verbs: C API, C++ RAII over it, opening a context on an MPI communicator.
#include "netsparse/netsparse.h"
#include "netsparse/netsparse.hpp"
#include "netsparse/netsparse_mpi.h"

// Dense and sparse allreduce over the library's transports (C API, C++ wrapper, MPI opening).
#include "netsparse/collectives_mpi.h"

// Embedding tables: cached lookups of a row-partitioned table, gradients by scatter-reduce.
#include "netsparse/embedding.hpp"

// Sparse matrices: CSR / COO, readers and generators, 1D partitions.
#include "netsparse/coo.hpp"
#include "netsparse/csr.hpp"
#include "netsparse/generators.hpp"
#include "netsparse/matrix_market.hpp"
#include "netsparse/metis.hpp"
#include "netsparse/partition.hpp"
#include "netsparse/scalar.hpp"
#include "netsparse/sparse_error.hpp"

// Local (one rank) tiled kernels and their autotuner.
#include "netsparse/autotune.hpp"
#include "netsparse/local_kernels.hpp"
#include "netsparse/tiled.hpp"

// Local transposition (MeNDA merge, scanTrans, mergeTrans) and outer-product SpMV.
#include "netsparse/transpose.hpp"

// Distributed matrices and kernels; your data in and out.
#include "netsparse/dist_matrix.hpp"
#include "netsparse/dist_transpose.hpp"
#include "netsparse/distributed.hpp"
#include "netsparse/graph_partition.hpp"
#include "netsparse/interop.hpp"
#include "netsparse/spgemm.hpp"

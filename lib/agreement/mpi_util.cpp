#include "agreement/mpi_util.hpp"

namespace netsparse::agreement {

ByteBlockType::ByteBlockType(std::size_t bytes) {
  check_mpi(MPI_Type_contiguous(to_mpi_count(bytes, "ByteBlockType"), MPI_BYTE, &type_),
            "MPI_Type_contiguous");
  check_mpi(MPI_Type_commit(&type_), "MPI_Type_commit");
}

ByteBlockType::~ByteBlockType() {
  if (type_ != MPI_DATATYPE_NULL) MPI_Type_free(&type_);
}

}  // namespace netsparse::agreement

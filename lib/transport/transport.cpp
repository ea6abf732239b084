// Names, transport selection and the factory.
#include "transport/transport_factory.hpp"

#include <cstdlib>
#include <stdexcept>
#include <string>

#include "transport/verbs_config.hpp"

namespace netsparse::transport {

const char* to_string(TransportKind kind) noexcept {
  switch (kind) {
    case TransportKind::kInproc:
      return "inproc";
    case TransportKind::kMpi:
      return "mpi";
    case TransportKind::kVerbs:
      return "verbs";
  }
  return "unknown";
}

const char* to_string(TxStatus status) noexcept {
  switch (status) {
    case TxStatus::kOk:
      return "ok";
    case TxStatus::kNoResource:
      return "no resource (progress and retry)";
    case TxStatus::kPeerFailed:
      return "peer failed";
    case TxStatus::kError:
      return "invalid request";
  }
  return "unknown";
}

TransportKind parse_transport_kind(std::string_view text) {
  if (text == "auto") {
    return verbs_device_available() ? TransportKind::kVerbs : TransportKind::kMpi;
  }
  if (text == "verbs") return TransportKind::kVerbs;
  if (text == "mpi") return TransportKind::kMpi;
  if (text == "inproc") return TransportKind::kInproc;
  throw std::invalid_argument("netsparse: unknown transport '" + std::string(text) +
                              "' (accepted: auto, verbs, mpi, inproc)");
}

TransportKind transport_from_env() {
  const char* value = std::getenv("NETSPARSE_TRANSPORT");
  const std::string_view text = (value == nullptr || value[0] == '\0') ? "auto" : value;
  try {
    return parse_transport_kind(text);
  } catch (const std::invalid_argument& e) {
    throw std::invalid_argument(std::string("NETSPARSE_TRANSPORT: ") + e.what());
  }
}

std::unique_ptr<Transport> make_transport(TransportKind kind, MPI_Comm comm,
                                          const TransportOptions& options) {
  switch (kind) {
    case TransportKind::kMpi: {
      auto mpi = make_mpi_transport(comm, options.need_thread_multiple, options.mpi);
      const char* shm = std::getenv("NETSPARSE_MPI_SHM");
      if (shm != nullptr && std::string(shm) == "0") return mpi;
      if (shm != nullptr && *shm != '\0' && std::string(shm) != "1") {
        throw std::invalid_argument(std::string("NETSPARSE_MPI_SHM='") + shm + "' is not 0 or 1");
      }
      return make_host_shm_transport(comm, std::move(mpi));
    }
    case TransportKind::kVerbs: {
      VerbsOptions verbs = options.verbs;
      verbs.apply_env();
      return make_verbs_transport(comm, verbs);
    }
    case TransportKind::kInproc: {
      int size = 0;
      if (MPI_Comm_size(comm, &size) != MPI_SUCCESS || size != 1) {
        throw std::invalid_argument(
            "netsparse: the inproc transport connects threads of one process; over a "
            "communicator it needs exactly one rank (got " +
            std::to_string(size) +
            "). Use InprocFabric for multi-node emulation, or NETSPARSE_TRANSPORT=mpi");
      }
      // The endpoint keeps the fabric's shared state alive after the fabric object is gone.
      InprocFabric fabric(1, options.inproc);
      return fabric.endpoint(0);
    }
  }
  throw std::invalid_argument("netsparse: invalid TransportKind value");
}

#if !defined(NETSPARSE_HAVE_VERBS)
bool verbs_compiled_in() noexcept {
  return false;
}
bool verbs_device_available() noexcept {
  return false;
}
std::unique_ptr<Transport> make_verbs_transport(MPI_Comm, const VerbsOptions&) {
  throw std::runtime_error(no_rdma_device_message(
      "this build of NetSparse has no verbs transport: libibverbs was not found at configure "
      "time or NETSPARSE_ENABLE_VERBS=OFF"));
}
#endif

}  // namespace netsparse::transport

// Names, transport selection and the factory.
#include "transport/transport_factory.hpp"

#include <array>
#include <stdexcept>
#include <string>

#include "config/settings.hpp"
#include "netsparse/netsparse.h"
#include "support/enum_names.hpp"
#include "transport/verbs_config.hpp"

namespace netsparse::transport {

constexpr auto kTransportKindNames = std::to_array<support::EnumName<TransportKind>>({
    {TransportKind::kInproc, "inproc"},
    {TransportKind::kMpi, "mpi"},
    {TransportKind::kVerbs, "verbs"},
});

const char* to_string(TransportKind kind) noexcept {
  return support::name_of<kTransportKindNames>(kind, "unknown");
}

constexpr auto kTxStatusNames = std::to_array<support::EnumName<TxStatus>>({
    {TxStatus::kOk, "ok"},
    {TxStatus::kNoResource, "no resource (progress and retry)"},
    {TxStatus::kPeerFailed, "peer failed"},
    {TxStatus::kError, "invalid request"},
});

const char* to_string(TxStatus status) noexcept {
  return support::name_of<kTxStatusNames>(status, "unknown");
}

TransportKind parse_transport_kind(std::string_view text) {
  if (text == "auto") {
    return verbs_device_available() ? TransportKind::kVerbs : TransportKind::kMpi;
  }
  if (const auto kind = support::value_named<kTransportKindNames>(text)) return *kind;
  throw std::invalid_argument("netsparse: unknown transport '" + std::string(text) +
                              "' (accepted: auto, verbs, mpi, inproc)");
}

TransportKind transport_from_env() {
  return parse_transport_kind(config::choice(config::Env::kTransport));
}

TransportKind transport_for_attribute(int ns_transport) {
  switch (ns_transport) {
    case NS_TRANSPORT_AUTO:
      return transport_from_env();
    case NS_TRANSPORT_MPI:
      return TransportKind::kMpi;
    case NS_TRANSPORT_VERBS:
      return TransportKind::kVerbs;
    case NS_TRANSPORT_INPROC:
      return TransportKind::kInproc;
  }
  throw std::invalid_argument("transport " + std::to_string(ns_transport) +
                              " is none of NS_TRANSPORT_AUTO, _MPI, _VERBS, _INPROC");
}

std::unique_ptr<Transport> make_transport(TransportKind kind, MPI_Comm comm,
                                          const TransportOptions& options) {
  switch (kind) {
    case TransportKind::kMpi: {
      auto mpi = make_mpi_transport(comm, options.need_thread_multiple, options.mpi);
      if (!options.host_rings || config::choice(config::Env::kMpiShm) == "0") return mpi;
      const std::size_t ring_bytes =
          config::is_set(config::Env::kMpiShmRingBytes)
              ? static_cast<std::size_t>(config::integer(config::Env::kMpiShmRingBytes))
              : 0;
      return make_host_shm_transport(comm, std::move(mpi), ring_bytes, nullptr,
                                     options.machine_comm, options.layout_agreed);
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

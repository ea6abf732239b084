// ns_open_mpi: a context over an MPI communicator, on the transport chosen by the attribute or
// NETSPARSE_TRANSPORT, with the MPI thread level checked up front (netsparse_mpi.h).
#include <omp.h>

#include <exception>
#include <stdexcept>
#include <string>
#include <vector>

#include "netsparse/netsparse_mpi.h"
#include "rig/api_error.hpp"
#include "rig/engine.hpp"
#include "transport/transport_factory.hpp"

namespace {

ns_status_t fail(ns_status_t s, const std::string& why) {
  netsparse::rig::set_last_error("ns_open_mpi: " + why);
  return s;
}

}  // namespace

extern "C" ns_status_t ns_open_mpi(MPI_Comm comm, const ns_context_attr* attr, ns_context** out) {
  namespace tr = netsparse::transport;
  if (out == nullptr) return fail(NS_ERR_INVALID, "out is NULL");
  int initialized = 0, finalized = 0;
  MPI_Initialized(&initialized);
  MPI_Finalized(&finalized);
  if (!initialized || finalized)
    return fail(NS_ERR_STATE, "MPI is not initialized (or already finalized)");
  if (comm == MPI_COMM_NULL) return fail(NS_ERR_INVALID, "comm is MPI_COMM_NULL");
  netsparse::rig::Config cfg;
  try {
    cfg = netsparse::rig::Config::from_attr(attr);
  } catch (const std::exception& e) {
    return fail(NS_ERR_INVALID, e.what());
  }
  if (cfg.progress_mode == NS_PROGRESS_AUTO) {
    // Collective (ns_open_mpi is): how many ranks share this host, to see whether a core is
    // free for a progress thread beside the OpenMP threads that compute.
    int provided = MPI_THREAD_SINGLE;
    MPI_Query_thread(&provided);
    // The host's ranks exchange their affinity masks: bound ranks own their cores, unbound
    // ones share the union.
    const std::vector<unsigned char> mine = netsparse::rig::affinity_mask();
    std::vector<std::vector<unsigned char>> masks{mine};
    int self = 0;
    MPI_Comm host = MPI_COMM_NULL;
    if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host) == MPI_SUCCESS) {
      int on_host = 1;
      MPI_Comm_size(host, &on_host);
      MPI_Comm_rank(host, &self);
      std::vector<unsigned char> all(mine.size() * static_cast<std::size_t>(on_host));
      MPI_Allgather(mine.data(), static_cast<int>(mine.size()), MPI_BYTE, all.data(),
                    static_cast<int>(mine.size()), MPI_BYTE, host);
      masks.assign(static_cast<std::size_t>(on_host), {});
      for (int p = 0; p < on_host; ++p) {
        masks[static_cast<std::size_t>(p)].assign(
            all.begin() + p * static_cast<long>(mine.size()),
            all.begin() + (p + 1) * static_cast<long>(mine.size()));
      }
      MPI_Comm_free(&host);
    }
    const netsparse::rig::ProgressChoice choice = netsparse::rig::choose_progress(
        netsparse::rig::cores_per_rank(masks, self), omp_get_max_threads(),
        provided >= MPI_THREAD_MULTIPLE,
        std::to_string(masks.size()) + " rank" + (masks.size() == 1 ? "" : "s") + " on this host");
    cfg.progress_mode = choice.mode;
    cfg.progress_reason = "auto: " + choice.reason;
  }
  const bool threaded = cfg.progress_mode == NS_PROGRESS_THREAD;
  if (threaded) {
    int provided = MPI_THREAD_SINGLE;
    MPI_Query_thread(&provided);
    if (provided < MPI_THREAD_MULTIPLE) {
      return fail(NS_ERR_MPI_THREAD_LEVEL,
                  std::string("the progress thread needs MPI_THREAD_MULTIPLE but MPI provides ") +
                      netsparse::transport::mpi_thread_level_name(provided) +
                      "; initialize MPI with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...) or use "
                      "NS_PROGRESS_INLINE");
    }
  }
  tr::TransportKind kind = tr::TransportKind::kMpi;
  try {
    switch (cfg.transport) {
      case NS_TRANSPORT_AUTO:
        kind = tr::transport_from_env();
        break;
      case NS_TRANSPORT_MPI:
        kind = tr::TransportKind::kMpi;
        break;
      case NS_TRANSPORT_VERBS:
        kind = tr::TransportKind::kVerbs;
        break;
      case NS_TRANSPORT_INPROC:
        kind = tr::TransportKind::kInproc;
        break;
    }
  } catch (const std::exception& e) {
    return fail(NS_ERR_INVALID, e.what());
  }
  if (kind == tr::TransportKind::kVerbs && !tr::verbs_device_available()) {
    return fail(NS_ERR_UNSUPPORTED,
                tr::verbs_compiled_in()
                    ? "verbs transport requested but no RDMA device has an active port"
                    : "verbs transport requested but this build has no verbs support");
  }
  try {
    tr::TransportOptions options;
    options.need_thread_multiple = threaded;
    // A context asking for packets larger than the transports' default receive buffers gets
    // larger buffers (one concatenation queue = one packet); smaller requests keep the default.
    if (cfg.packet_bytes > options.mpi.max_packet_bytes)
      options.mpi.max_packet_bytes = cfg.packet_bytes;
    if (cfg.packet_bytes > options.verbs.max_packet_bytes) {
      options.verbs.max_packet_bytes = cfg.packet_bytes;
    }
    *out = new ns_context(tr::make_transport(kind, comm, options), cfg);
    return NS_OK;
  } catch (const std::bad_alloc&) {
    return fail(NS_ERR_NO_MEMORY, "out of memory");
  } catch (const std::invalid_argument& e) {
    return fail(NS_ERR_INVALID, e.what());
  } catch (const std::exception& e) {
    return fail(NS_ERR_TRANSPORT, e.what());
  }
}

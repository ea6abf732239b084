// ns_open_mpi: a context over an MPI communicator, on the transport chosen by the attribute or
// NETSPARSE_TRANSPORT, with the MPI thread level checked up front (netsparse_mpi.h).
#include <omp.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <vector>

#include "netsparse/netsparse_mpi.h"
#include "rig/api_error.hpp"
#include "rig/engine.hpp"
#include "rig/handles.hpp"
#include "transport/transport_factory.hpp"

namespace {

ns_status_t fail(ns_status_t s, const std::string& why) {
  netsparse::rig::set_last_error("ns_open_mpi: " + why);
  return s;
}

// The settings every rank must share, with this rank's refusal reason (empty if none).
struct SharedSettings {
  char error[512];
  std::int32_t transport;
  std::uint32_t packet_bytes;
  std::uint32_t flags;
  std::int32_t virtual_queues;
  std::uint64_t delay_ns;
};

std::string agree_on_settings(MPI_Comm comm, const netsparse::rig::Config& cfg,
                              const std::string& why) {
  SharedSettings mine{};
  std::snprintf(mine.error, sizeof mine.error, "%s", why.c_str());
  mine.transport = cfg.transport;
  mine.packet_bytes = cfg.packet_bytes;
  mine.flags = cfg.flags;
  mine.virtual_queues = cfg.virtual_queues ? 1 : 0;
  mine.delay_ns = cfg.delay_ns;
  int size = 1;
  MPI_Comm_size(comm, &size);
  std::vector<SharedSettings> all(static_cast<std::size_t>(size));
  if (MPI_Allgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, comm) !=
      MPI_SUCCESS) {
    return "MPI_Allgather of the context settings failed";
  }
  for (int r = 0; r < size; ++r) {
    if (all[static_cast<std::size_t>(r)].error[0] != '\0') {
      return "rank " + std::to_string(r) + ": " + all[static_cast<std::size_t>(r)].error;
    }
  }
  const auto differ = [&](const char* field, auto get) -> std::string {
    for (int r = 1; r < size; ++r) {
      if (get(all[static_cast<std::size_t>(r)]) != get(all[0])) {
        return std::string("ranks disagree on ") + field + ": rank 0 has " +
               std::to_string(get(all[0])) + ", rank " + std::to_string(r) + " has " +
               std::to_string(get(all[static_cast<std::size_t>(r)]));
      }
    }
    return {};
  };
  for (const std::string& d :
       {differ("transport", [](const SharedSettings& x) { return x.transport; }),
        differ("packet_bytes", [](const SharedSettings& x) { return x.packet_bytes; }),
        differ("flags", [](const SharedSettings& x) { return x.flags; }),
        differ("virtual_queues", [](const SharedSettings& x) { return x.virtual_queues; }),
        differ("concat_delay_ns", [](const SharedSettings& x) { return x.delay_ns; })}) {
    if (!d.empty()) return d;
  }
  return {};
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
  std::string why;
  try {
    cfg = netsparse::rig::Config::from_attr(attr);
    cfg.check_memory_budget();
  } catch (const std::exception& e) {
    why = e.what();
  }
  // Collective agreement before anything else: a rank whose arguments are refused must not
  // leave the others waiting in the transport's collectives, and settings that only work when
  // every rank has them must match. Every rank fails with the same message.
  if (const std::string disagreement = agree_on_settings(comm, cfg, why); !disagreement.empty()) {
    return fail(NS_ERR_INVALID, disagreement);
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
    auto ctx = std::make_unique<ns_context>(tr::make_transport(kind, comm, options), cfg);
    // A context still open when the application calls MPI_Finalize is closed at its start,
    // while MPI works (the progress thread must not call MPI during or after it).
    ctx->close_at_mpi_finalize();
    *out = ctx.release();
    netsparse::rig::register_handle(*out, netsparse::rig::HandleKind::kContext);
    return NS_OK;
  } catch (const std::bad_alloc&) {
    return fail(NS_ERR_NO_MEMORY, "out of memory");
  } catch (const std::invalid_argument& e) {
    return fail(NS_ERR_INVALID, e.what());
  } catch (const std::exception& e) {
    return fail(NS_ERR_TRANSPORT, e.what());
  }
}

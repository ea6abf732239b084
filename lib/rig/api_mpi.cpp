// ns_open_mpi: a context over an MPI communicator, on the transport chosen by the attribute or
// NETSPARSE_TRANSPORT, with the MPI thread level checked up front (netsparse_mpi.h).
#include <omp.h>

#include <algorithm>
#include <array>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <mutex>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "agreement/mpi.hpp"
#include "config/settings.hpp"
#include "netsparse/netsparse_mpi.h"
#include "rig/api_status.hpp"
#include "rig/engine.hpp"
#include "rig/handles.hpp"
#include "support/enum_names.hpp"
#include "support/memory.hpp"
#include "transport/host_layout.hpp"
#include "transport/transport_factory.hpp"

namespace {

ns_status_t fail(ns_status_t s, const std::string& why) {
  return netsparse::rig::fail("ns_open_mpi", s, why);
}

constexpr auto kProgressModeNames = std::to_array<netsparse::support::EnumName<int>>({
    {NS_PROGRESS_THREAD, "NS_PROGRESS_THREAD"},
    {NS_PROGRESS_INLINE, "NS_PROGRESS_INLINE"},
    {NS_PROGRESS_AUTO, "NS_PROGRESS_AUTO"},
});

const char* progress_name(int mode) {
  return netsparse::support::name_of<kProgressModeNames>(mode, "unknown");
}

// The transport's options for a context of `cfg`.
netsparse::transport::TransportOptions transport_options(const netsparse::rig::Config& cfg,
                                                         bool threaded) {
  netsparse::transport::TransportOptions options;
  options.need_thread_multiple = threaded;
  options.host_rings = (cfg.flags & NS_CTX_NO_HOST_RINGS) == 0;
  // A context asking for packets larger than the transports' default receive buffers gets
  // larger buffers (one concatenation queue = one packet); smaller requests keep the default.
  if (cfg.packet_bytes > options.mpi.max_packet_bytes) {
    // Larger frames, fewer of them: the send and receive slabs stay at the default's bytes
    // (64 x 64 KiB each), with 8 buffers at least.
    const std::size_t slab =
        options.mpi.max_packet_bytes * static_cast<std::size_t>(options.mpi.recv_ring);
    options.mpi.max_packet_bytes = cfg.packet_bytes;
    const int buffers = std::max(8, static_cast<int>(slab / cfg.packet_bytes));
    options.mpi.recv_ring = std::min(options.mpi.recv_ring, buffers);
    options.mpi.send_ring = std::min(options.mpi.send_ring, buffers);
  }
  if (cfg.packet_bytes > options.verbs.max_packet_bytes) {
    options.verbs.max_packet_bytes = cfg.packet_bytes;
  }
  return options;
}

// This rank's side of the agreement: everything that decides which collectives ns_open_mpi and
// the transport's constructor call, and what must be equal for the context to work, with the
// first reason this rank refuses to open. Agreed before any other collective: ranks that
// differ (one AUTO progress, one INLINE; one on shared-memory rings, one not) would otherwise
// enter different collectives and wait forever.
netsparse::agreement::Agreement local_settings(const ns_context_attr* attr,
                                               netsparse::rig::Config& cfg,
                                               netsparse::transport::TransportKind& kind) {
  namespace tr = netsparse::transport;
  netsparse::agreement::Agreement mine;
  const auto refuse = [&mine](ns_status_t s, const std::string& why) { mine.refuse(s, why); };
  try {
    cfg = netsparse::rig::Config::from_attr(attr);
  } catch (const std::exception& e) {
    refuse(NS_ERR_INVALID, e.what());
  }
  if (const std::string bad = netsparse::config::first_error(netsparse::config::Scope::kLibrary);
      !bad.empty()) {
    refuse(NS_ERR_INVALID, bad);
  }
  int provided = MPI_THREAD_SINGLE, is_main = 0;
  MPI_Query_thread(&provided);
  MPI_Is_thread_main(&is_main);
  if (cfg.progress_mode == NS_PROGRESS_THREAD && provided < MPI_THREAD_MULTIPLE) {
    refuse(NS_ERR_MPI_THREAD_LEVEL,
           std::string("the progress thread needs MPI_THREAD_MULTIPLE but MPI provides ") +
               tr::mpi_thread_level_name(provided) +
               "; initialize MPI with MPI_Init_thread(..., MPI_THREAD_MULTIPLE, ...) or use "
               "NS_PROGRESS_INLINE");
  }
  if (provided < MPI_THREAD_SERIALIZED && !is_main) {
    refuse(NS_ERR_MPI_THREAD_LEVEL,
           std::string("called from a thread other than the main thread but MPI provides only ") +
               tr::mpi_thread_level_name(provided) +
               "; initialize MPI with MPI_Init_thread(..., MPI_THREAD_SERIALIZED or better, ...)");
  }
  try {
    kind = tr::transport_for_attribute(cfg.transport);
  } catch (const std::exception& e) {
    refuse(NS_ERR_INVALID, e.what());
  }
  if (kind == tr::TransportKind::kVerbs && !tr::verbs_device_available()) {
    refuse(NS_ERR_UNSUPPORTED,
           tr::verbs_compiled_in()
               ? "verbs transport requested but no RDMA device has an active port"
               : "verbs transport requested but this build has no verbs support");
  }
  // The memory the context needs whatever the traffic (the engine's tables, the transport's
  // buffers), before any of it is allocated: refused on every rank, naming the size.
  if (!mine.refused()) {
    try {
      const tr::TransportOptions options = transport_options(cfg, false);
      const std::uint64_t transport_bytes =
          kind == tr::TransportKind::kMpi     ? tr::mpi_buffer_bytes(options.mpi)
          : kind == tr::TransportKind::kVerbs ? tr::verbs_buffer_bytes(options.verbs)
                                              : 0;
      cfg.check_memory_budget(transport_bytes);
    } catch (const netsparse::support::OutOfMemory& e) {
      refuse(NS_ERR_NO_MEMORY, e.what());
    } catch (const std::exception& e) {
      refuse(NS_ERR_INVALID, e.what());
    }
  }
  mine.field("the transport (ns_context_attr.transport, else NETSPARSE_TRANSPORT)",
             std::string(tr::to_string(kind)));
  mine.field("progress_mode", progress_name(cfg.progress_mode));
  mine.field("packet_bytes", cfg.packet_bytes);
  // NS_CTX_UNCHECKED changes only this rank's post and poll: not agreed.
  mine.field("flags", cfg.flags & ~std::uint32_t{NS_CTX_UNCHECKED});
  mine.field("virtual_queues", cfg.virtual_queues ? 1u : 0u);
  mine.field("wire", cfg.wire == NS_WIRE_PAPER ? "paper" : "compact");
  mine.field("concat_delay_ns", cfg.delay_ns);
  // The effective values of the agreed environment variables (config/settings.hpp), in table
  // order (empty when this rank refused: its refusal is reported first).
  // (agreed_values() throws for a bad value, which first_error() already refused).
  const auto names = netsparse::config::agreed_names();
  const auto values = mine.refused() ? decltype(netsparse::config::agreed_values()){}
                                     : netsparse::config::agreed_values();
  for (std::size_t i = 0; i < names.size(); ++i) {
    mine.field(std::string(names[i]), i < values.size() ? values[i].second : std::string());
  }
  return mine;
}

}  // namespace

namespace {

// NETSPARSE_* names that are no setting (a misspelt NETSPARSE_RANKS_PER_HOST would silently
// change nothing): one warning line each, from the communicator's rank 0, once per process.
void warn_unknown_names(MPI_Comm comm) {
  int rank = 0;
  MPI_Comm_rank(comm, &rank);
  if (rank == 0) netsparse::config::warn_unknown_names_once();
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
  tr::TransportKind kind = tr::TransportKind::kMpi;
  // The ranks sharing this rank's memory (MPI_Comm_split_type SHARED), split first by every
  // rank whatever its settings: AUTO progress counts them, the host rings cut them into hosts,
  // and the layout check below needs them, all from this one split.
  struct MachineComm {
    MPI_Comm comm = MPI_COMM_NULL;
    ~MachineComm() {
      if (comm != MPI_COMM_NULL) MPI_Comm_free(&comm);
    }
  } machine;
  const int split_rc =
      MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &machine.comm);
  netsparse::agreement::Agreement mine = local_settings(attr, cfg, kind);
  // The host layout the rings would be built on (NETSPARSE_RANKS_PER_HOST: virtual hosts inside
  // one machine each): refused in this agreement, so the rings need no agreement of their own
  // (issue 34: one collective less at every open).
  const bool host_rings = kind == tr::TransportKind::kMpi &&
                          (cfg.flags & NS_CTX_NO_HOST_RINGS) == 0 && !mine.refused() &&
                          netsparse::config::choice(netsparse::config::Env::kMpiShm) != "0";
  if (split_rc != MPI_SUCCESS) {
    mine.refuse(NS_ERR_TRANSPORT, "MPI_Comm_split_type (the ranks sharing memory) failed");
  } else if (host_rings) {
    try {
      if (const std::string why = tr::virtual_host_refusal(comm, machine.comm); !why.empty()) {
        mine.refuse(NS_ERR_INVALID, why);
      }
    } catch (const std::exception& e) {
      mine.refuse(NS_ERR_TRANSPORT, e.what());
    }
  }
  // Collective agreement before anything else: a rank whose arguments are refused must not
  // leave the others waiting in the transport's collectives, and settings that decide the
  // collectives (or only work when every rank has them) must match. Every rank fails with the
  // same status and message.
  netsparse::agreement::Verdict verdict;
  try {
    verdict = netsparse::agreement::settle_over_mpi(mine, comm);
  } catch (const std::exception& e) {
    return fail(NS_ERR_TRANSPORT, std::string("agreeing on the context settings: ") + e.what());
  }
  if (!verdict.ok()) return fail(verdict.refused ? verdict.status : NS_ERR_INVALID, verdict.reason);
  warn_unknown_names(comm);
  if (cfg.progress_mode == NS_PROGRESS_AUTO) {
    // Collective (ns_open_mpi is): how many ranks share this host, to see whether a core is
    // free for a progress thread beside the OpenMP threads that compute.
    int provided = MPI_THREAD_SINGLE;
    MPI_Query_thread(&provided);
    // The host's ranks exchange their affinity masks: bound ranks own their cores, unbound
    // ones share the union.
    const std::vector<unsigned char> my_mask = netsparse::rig::affinity_mask();
    std::vector<std::vector<unsigned char>> masks{my_mask};
    int self = 0;
    const MPI_Comm host = machine.comm;  // handed on to the host rings (TransportOptions)
    {
      int on_host = 1;
      MPI_Comm_size(host, &on_host);
      MPI_Comm_rank(host, &self);
      std::vector<unsigned char> all(my_mask.size() * static_cast<std::size_t>(on_host));
      MPI_Allgather(my_mask.data(), static_cast<int>(my_mask.size()), MPI_BYTE, all.data(),
                    static_cast<int>(my_mask.size()), MPI_BYTE, host);
      masks.assign(static_cast<std::size_t>(on_host), {});
      for (int p = 0; p < on_host; ++p) {
        masks[static_cast<std::size_t>(p)].assign(
            all.begin() + p * static_cast<long>(my_mask.size()),
            all.begin() + (p + 1) * static_cast<long>(my_mask.size()));
      }
    }
    const netsparse::rig::ProgressChoice choice = netsparse::rig::choose_progress(
        netsparse::rig::cores_per_rank(masks, self), omp_get_max_threads(),
        provided >= MPI_THREAD_MULTIPLE,
        std::to_string(masks.size()) + " rank" + (masks.size() == 1 ? "" : "s") + " on this host");
    cfg.progress_mode = choice.mode;
    cfg.progress_reason = "auto: " + choice.reason;
    // No free core: the application drives the engine, and a standby thread that sleeps
    // serves the peers only while the application stays away from the library (it calls MPI
    // then, so it needs MPI_THREAD_MULTIPLE like a progress thread).
    const auto standby = static_cast<std::uint32_t>(
        netsparse::config::integer(netsparse::config::Env::kProgressStandbyUs));
    if (choice.mode == NS_PROGRESS_INLINE && standby > 0 && provided >= MPI_THREAD_MULTIPLE) {
      cfg.standby_us = standby;
      cfg.progress_reason += "; a standby thread serves the peers after " +
                             std::to_string(standby) + " us without a library call";
    }
  }
  // THREAD asked with too low a thread level was refused above; AUTO picks THREAD (or a standby
  // thread) only with MPI_THREAD_MULTIPLE.
  const bool threaded = cfg.progress_mode == NS_PROGRESS_THREAD || cfg.standby_us > 0;
  try {
    tr::TransportOptions options = transport_options(cfg, threaded);
    options.machine_comm = &machine.comm;  // taken over by the host rings, else freed here
    options.layout_agreed = host_rings;
    auto ctx = std::make_unique<ns_context>(tr::make_transport(kind, comm, options), cfg);
    // A context still open when the application calls MPI_Finalize is closed at its start,
    // while MPI works (the progress thread must not call MPI during or after it).
    ctx->close_at_mpi_finalize();
    *out = ctx.release();
    netsparse::rig::register_handle(*out, netsparse::rig::HandleKind::kContext);
    return NS_OK;
  } catch (...) {
    const auto [status, what] = netsparse::rig::status_of_current_exception();
    return fail(status, what);
  }
}

// ns_open_mpi: a context over an MPI communicator, on the transport chosen by the attribute or
// NETSPARSE_TRANSPORT, with the MPI thread level checked up front (netsparse_mpi.h).
#include <omp.h>

#include <cstdint>
#include <cstdio>
#include <exception>
#include <memory>
#include <stdexcept>
#include <string>
#include <utility>
#include <vector>

#include "config/settings.hpp"
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

// Everything that decides which collectives ns_open_mpi and the transport's constructor call,
// and what must be equal for the context to work, with this rank's refusal (status + reason).
// Agreed in ONE MPI_Allgather before any other collective: ranks that differ (one AUTO progress,
// one INLINE; one on shared-memory rings, one not) would otherwise enter different collectives
// and wait forever.
struct OpenAgreement {
  char error[512];
  std::int32_t status;
  std::int32_t transport;  // the resolved TransportKind
  std::int32_t progress_mode;
  std::uint32_t packet_bytes;
  std::uint32_t flags;
  std::int32_t virtual_queues;
  std::int32_t wire;
  std::uint64_t delay_ns;
  // The effective values of the agreed environment variables (config/settings.hpp), in table
  // order; values are short (choices and integers), longer ones are cut.
  char agreed[netsparse::config::kAgreedCount][48];
};

const char* progress_name(int mode) {
  switch (mode) {
    case NS_PROGRESS_THREAD:
      return "NS_PROGRESS_THREAD";
    case NS_PROGRESS_INLINE:
      return "NS_PROGRESS_INLINE";
    case NS_PROGRESS_AUTO:
      return "NS_PROGRESS_AUTO";
  }
  return "unknown";
}

// The first refusal of any rank (with its status), else the first setting the ranks disagree
// on; {NS_OK, ""} when every rank may go on.
std::pair<ns_status_t, std::string> agree_on_open(MPI_Comm comm, const OpenAgreement& mine) {
  int size = 1;
  MPI_Comm_size(comm, &size);
  std::vector<OpenAgreement> all(static_cast<std::size_t>(size));
  if (MPI_Allgather(&mine, sizeof mine, MPI_BYTE, all.data(), sizeof mine, MPI_BYTE, comm) !=
      MPI_SUCCESS) {
    return {NS_ERR_TRANSPORT, "MPI_Allgather of the context settings failed"};
  }
  for (int r = 0; r < size; ++r) {
    const OpenAgreement& a = all[static_cast<std::size_t>(r)];
    if (a.error[0] != '\0') {
      return {static_cast<ns_status_t>(a.status), "rank " + std::to_string(r) + ": " + a.error};
    }
  }
  namespace tr = netsparse::transport;
  const auto differ = [&](const std::string& field, auto get) -> std::string {
    for (int r = 1; r < size; ++r) {
      if (get(all[static_cast<std::size_t>(r)]) != get(all[0])) {
        return "ranks disagree on " + field + ": rank 0 has " + get(all[0]) + ", rank " +
               std::to_string(r) + " has " + get(all[static_cast<std::size_t>(r)]) +
               " (it must be the same on every rank)";
      }
    }
    return {};
  };
  const auto num = [](auto v) { return std::to_string(v); };
  std::vector<std::string> found = {
      differ("the transport (ns_context_attr.transport, else NETSPARSE_TRANSPORT)",
             [](const OpenAgreement& x) {
               return std::string(tr::to_string(static_cast<tr::TransportKind>(x.transport)));
             }),
      differ("progress_mode",
             [](const OpenAgreement& x) { return std::string(progress_name(x.progress_mode)); }),
      differ("packet_bytes", [&](const OpenAgreement& x) { return num(x.packet_bytes); }),
      differ("flags", [&](const OpenAgreement& x) { return num(x.flags); }),
      differ("virtual_queues", [&](const OpenAgreement& x) { return num(x.virtual_queues); }),
      differ("wire", [&](const OpenAgreement& x) { return num(x.wire); }),
      differ("concat_delay_ns", [&](const OpenAgreement& x) { return num(x.delay_ns); })};
  const auto names = netsparse::config::agreed_names();
  for (std::size_t i = 0; i < names.size(); ++i) {
    found.push_back(
        differ(names[i], [i](const OpenAgreement& x) { return std::string(x.agreed[i]); }));
  }
  for (const std::string& d : found) {
    if (!d.empty()) return {NS_ERR_INVALID, d};
  }
  return {NS_OK, {}};
}

// This rank's side of the agreement: its settings and the first reason it refuses to open.
OpenAgreement local_settings(const ns_context_attr* attr, netsparse::rig::Config& cfg,
                             netsparse::transport::TransportKind& kind) {
  namespace tr = netsparse::transport;
  OpenAgreement mine{};
  const auto refuse = [&mine](ns_status_t s, const std::string& why) {
    if (mine.error[0] != '\0') return;  // the first reason wins
    mine.status = s;
    std::snprintf(mine.error, sizeof mine.error, "%s", why.c_str());
  };
  try {
    cfg = netsparse::rig::Config::from_attr(attr);
    cfg.check_memory_budget();
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
    refuse(NS_ERR_INVALID, e.what());
  }
  if (kind == tr::TransportKind::kVerbs && !tr::verbs_device_available()) {
    refuse(NS_ERR_UNSUPPORTED,
           tr::verbs_compiled_in()
               ? "verbs transport requested but no RDMA device has an active port"
               : "verbs transport requested but this build has no verbs support");
  }
  mine.transport = static_cast<std::int32_t>(kind);
  mine.progress_mode = cfg.progress_mode;
  mine.packet_bytes = cfg.packet_bytes;
  mine.flags = cfg.flags;
  mine.virtual_queues = cfg.virtual_queues ? 1 : 0;
  mine.wire = cfg.wire;
  mine.delay_ns = cfg.delay_ns;
  if (mine.error[0] == '\0') {  // the values are valid (first_error found nothing)
    const auto values = netsparse::config::agreed_values();
    for (std::size_t i = 0; i < values.size(); ++i) {
      std::snprintf(mine.agreed[i], sizeof mine.agreed[i], "%s", values[i].second.c_str());
    }
  }
  return mine;
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
  const OpenAgreement mine = local_settings(attr, cfg, kind);
  // Collective agreement before anything else: a rank whose arguments are refused must not
  // leave the others waiting in the transport's collectives, and settings that decide the
  // collectives (or only work when every rank has them) must match. Every rank fails with the
  // same status and message.
  if (const auto [status, why] = agree_on_open(comm, mine); status != NS_OK) {
    return fail(status, why);
  }
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
    MPI_Comm host = MPI_COMM_NULL;
    if (MPI_Comm_split_type(comm, MPI_COMM_TYPE_SHARED, 0, MPI_INFO_NULL, &host) == MPI_SUCCESS) {
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
      MPI_Comm_free(&host);
    }
    const netsparse::rig::ProgressChoice choice = netsparse::rig::choose_progress(
        netsparse::rig::cores_per_rank(masks, self), omp_get_max_threads(),
        provided >= MPI_THREAD_MULTIPLE,
        std::to_string(masks.size()) + " rank" + (masks.size() == 1 ? "" : "s") + " on this host");
    cfg.progress_mode = choice.mode;
    cfg.progress_reason = "auto: " + choice.reason;
  }
  // THREAD asked with too low a thread level was refused above; AUTO picks THREAD only with
  // MPI_THREAD_MULTIPLE.
  const bool threaded = cfg.progress_mode == NS_PROGRESS_THREAD;
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

// RigEngine (include/netsparse/distributed.hpp) and its implementation's verbs (rig_engine.hpp):
// opening the engine, a run's begin and end, its completions; the context attributes of an
// engine opened for EngineOptions.
#include "distributed/rig_engine.hpp"

#include <exception>
#include <memory>
#include <stdexcept>
#include <string>

#include "agreement/mpi_util.hpp"
#include "config/settings.hpp"
#include "distributed/deadlines.hpp"
#include "netsparse/netsparse_mpi.h"

namespace netsparse {

RigEngine::Impl::Impl(MPI_Comm comm, const EngineOptions& options) {
  Impl& s = *this;
  s.comm = comm;
  s.options = options;
  const ContextAttr attr = dist::engine_context_attr(options);
  // Opening is collective; a failure on one rank must not leave the others waiting.
  std::exception_ptr error;
  try {
    s.ctx = open_mpi(comm, attr);  // validates the environment (config/settings.hpp)
    s.progress_interval_ns =
        static_cast<std::uint64_t>(config::integer(config::Env::kProgressIntervalNs));
  } catch (...) {
    error = std::current_exception();
  }
  dist::agree_on_failure(comm, error);
  s.cq = Cq(s.ctx, 2 * Impl::kQpDepth);
  s.qp = Qp(s.ctx, s.cq, Impl::kQpDepth);
  s.inline_progress = s.ctx.progress_mode() == NS_PROGRESS_INLINE;
  s.finalize_hook = rig::FinalizeHook([&s] { s.release(); });
}

RigEngine::RigEngine(MPI_Comm comm, const EngineOptions& options)
    : impl_(std::make_unique<Impl>(comm, options)) {}

RigEngine::~RigEngine() {
  impl_->finalize_hook.release();
  impl_->release();
}

const EngineOptions& RigEngine::options() const noexcept {
  return impl_->options;
}
std::string RigEngine::transport_name() const {
  return impl_->ctx.transport_name();
}
std::uint64_t RigEngine::stat(int which) const {
  return impl_->ctx.stat(static_cast<ns_stat>(which));
}
double RigEngine::prs_per_packet() const {
  return impl_->ctx.prs_per_packet();
}
std::string RigEngine::stats_json() const {
  return impl_->ctx.stats_json();
}
void RigEngine::reset_stats() {
  impl_->ctx.stats_reset();
  impl_->last_run_end = dist::EngineCounters{};
}

void RigEngine::Impl::bind_operand(const void* operand, std::uint64_t rows,
                                   std::uint32_t prop_bytes, const RowPartition& cols) {
  if (registered_as(rows, prop_bytes, cols, true)) rebind_if_moved(operand);
}

dist::EngineCounters RigEngine::Impl::begin_run(const void* base, std::uint64_t rows,
                                                std::uint32_t prop_bytes, std::uint32_t elem_bytes,
                                                const RowPartition& cols, bool rig_only,
                                                std::chrono::milliseconds deadline) {
  // This run's traffic: everything the engine counted since the previous run on it ended
  // (with a progress thread, a peer that entered this run first may already be answered).
  const dist::EngineCounters before = counters_since_last_run();
  ensure_region(base, rows, prop_bytes, elem_bytes, cols, rig_only, deadline);
  progress_seconds = 0;
  round_announced = round_complete = false;
  return before;
}

std::size_t RigEngine::Impl::completions(std::span<ns_wc> wc, bool block, const char* mode) {
  const std::size_t n =
      block ? cq.wait(wc, std::chrono::milliseconds(kWaitTimeoutMs)) : cq.poll(wc);
  if (block && n == 0) {
    throw std::runtime_error(std::string(mode) + ": no completion within " +
                             std::to_string(kWaitTimeoutMs) + " ms");
  }
  return n;
}

dist::EngineCounters RigEngine::Impl::end_run(CommStats& stats) {
  const double t0 = dist::now_seconds();
  // Peers may still be reading this rank's block: nobody returns (and lets the caller change
  // its operand) before every rank is done.
  quiesce();
  stats.sync_seconds += dist::now_seconds() - t0;
  stats.progress_seconds += progress_seconds;
  const dist::EngineCounters after = dist::EngineCounters::read(ctx);
  last_run_end = after;
  return after;
}

namespace dist {

void throw_wc(const ns_wc& wc, const char* mode) {
  throw std::runtime_error(
      std::string(mode) + ": work request " + std::to_string(wc.wr_id) + " (" +
      ns_wr_opcode_str(wc.opcode) + ") failed: " + ns_wc_status_str(wc.status) +
      (wc.vendor_err != 0 ? " (vendor_err " + std::to_string(wc.vendor_err) + ")" : std::string()));
}

ContextAttr engine_context_attr(const EngineOptions& options) {
  ContextAttr attr;
  attr.transport(static_cast<ns_transport>(options.transport));
  if (options.client_units > 0 || options.server_units > 0) {
    attr.units(options.client_units > 0 ? options.client_units : 2,
               options.server_units > 0 ? options.server_units : 2);
  }
  attr.progress(static_cast<ns_progress_mode>(options.progress));
  if (options.packet_bytes > 0) attr.packet_bytes(options.packet_bytes);
  if (options.delay_ns >= 0) attr.concat_delay(std::chrono::nanoseconds(options.delay_ns));
  if (options.pending_entries > 0) attr.pending_entries(options.pending_entries);
  if (options.idx_chunk > 0) attr.idx_chunk(options.idx_chunk);
  if (options.watchdog_ms > 0) attr.watchdog(std::chrono::milliseconds(options.watchdog_ms));
  attr.flags(options.flags);
  return attr;
}

}  // namespace dist
}  // namespace netsparse

// The C API's statistics (netsparse.h): ns_stat_name, ns_stat_get, ns_stat_prs_per_packet,
// ns_stats_reset and ns_stats_json, from one table of the statistics (kStats).
#include <algorithm>
#include <cstdint>
#include <cstring>
#include <iterator>
#include <stdexcept>
#include <string>

#include <nlohmann/json.hpp>

#include "config/settings.hpp"
#include "netsparse/config.h"
#include "netsparse/netsparse.h"
#include "rig/api_checks.hpp"
#include "rig/engine.hpp"

using netsparse::rig::Config;
using netsparse::rig::Engine;
using netsparse::rig::guarded;
using netsparse::rig::HandleKind;
using namespace netsparse::rig::api;  // invalid, live, not_live

namespace {
using Snap = Engine::Snapshot;
using U64 = std::uint64_t;

// The upper-layer bytes of the Table 7 (read and response) packets: the paper's 50 B per packet.
U64 upper_layer_bytes(const Snap& s) {
  return netsparse::concat::kUpperLayerBytes * (s.concat.packets[0] + s.concat.packets[1]);
}

// Every statistic once: its ns_stat value, its name (ns_stat_name, and its key in
// ns_stats_json's "stats") and how an engine snapshot gives it (ns_stat_get). The NS_STAT_* byte
// and packet counters are the paper's Table 7: read and response (property) traffic, type
// indices 0 and 1. Invalid and control packets are reported apart (ns_stats_json).
struct Stat {
  int which;
  const char* name;
  U64 (*value)(const Snap&);
};
constexpr Stat kStats[] = {
    {NS_STAT_PRS_REQUESTED, "prs_requested",
     [](const Snap& s) -> U64 { return s.client.requested; }},
    {NS_STAT_PRS_FILTERED, "prs_filtered", [](const Snap& s) -> U64 { return s.client.filtered; }},
    {NS_STAT_PRS_COALESCED, "prs_coalesced",
     [](const Snap& s) -> U64 { return s.client.coalesced; }},
    {NS_STAT_PRS_LOCAL, "prs_local", [](const Snap& s) -> U64 { return s.client.local; }},
    {NS_STAT_PRS_SENT, "prs_sent", [](const Snap& s) -> U64 { return s.client.sent; }},
    {NS_STAT_READ_PACKETS, "read_packets",
     [](const Snap& s) -> U64 { return s.concat.packets[0]; }},
    {NS_STAT_RESPONSE_PACKETS, "response_packets",
     [](const Snap& s) -> U64 { return s.concat.packets[1]; }},
    {NS_STAT_READ_BYTES, "read_bytes", [](const Snap& s) -> U64 { return s.concat.wire_bytes[0]; }},
    {NS_STAT_RESPONSE_BYTES, "response_bytes",
     [](const Snap& s) -> U64 { return s.concat.wire_bytes[1]; }},
    {NS_STAT_HEADER_BYTES, "header_bytes",
     [](const Snap& s) -> U64 {
       return s.concat.header_bytes[0] + s.concat.header_bytes[1] + upper_layer_bytes(s);
     }},
    {NS_STAT_PAYLOAD_BYTES, "payload_bytes",
     [](const Snap& s) -> U64 { return s.concat.payload_bytes[0] + s.concat.payload_bytes[1]; }},
    {NS_STAT_WIRE_BYTES, "wire_bytes",
     [](const Snap& s) -> U64 { return s.concat.wire_bytes[0] + s.concat.wire_bytes[1]; }},
    {NS_STAT_STALLS, "stalls", [](const Snap& s) -> U64 { return s.client.stalls; }},
    {NS_STAT_EXPIRATIONS, "expirations",
     [](const Snap& s) -> U64 {
       return s.concat.flushes[static_cast<int>(netsparse::concat::FlushCause::kExpired)];
     }},
    {NS_STAT_TIMEOUTS, "timeouts", [](const Snap& s) -> U64 { return s.timeouts; }},
    {NS_STAT_RDMA_READS, "rdma_reads", [](const Snap& s) -> U64 { return s.rdma_reads; }},
    {NS_STAT_SERVER_PRS, "server_prs", [](const Snap& s) -> U64 { return s.server.answered; }},
    {NS_STAT_INVALID_PRS, "invalid_prs", [](const Snap& s) -> U64 { return s.server.invalid; }},
    {NS_STAT_MALFORMED, "malformed", [](const Snap& s) -> U64 { return s.malformed_total(); }},
    {NS_STAT_STALE_RESPONSES, "stale_responses",
     [](const Snap& s) -> U64 { return s.client.stale_responses; }},
    {NS_STAT_FRAMES, "frames", [](const Snap& s) -> U64 { return s.frames.frames; }},
    {NS_STAT_PLAN_RECORDS, "plan_records", [](const Snap& s) -> U64 { return s.plans.recorded; }},
    {NS_STAT_PLAN_REPLAYS, "plan_replays", [](const Snap& s) -> U64 { return s.plans.replays; }},
    {NS_STAT_PLAN_ROWS, "plan_rows", [](const Snap& s) -> U64 { return s.plans.rows_in; }},
    {NS_STAT_PLAN_PACKETS, "plan_packets",
     [](const Snap& s) -> U64 { return s.plans.packets_out; }},
    {NS_STAT_PLAN_BYTES, "plan_bytes", [](const Snap& s) -> U64 { return s.plans.bytes_out; }},
    {NS_STAT_PLAN_WIRE_BYTES, "plan_wire_bytes",
     [](const Snap& s) -> U64 {
       return s.plans.bytes_out + netsparse::concat::kUpperLayerBytes * s.plans.packets_out;
     }},
    {NS_STAT_PLAN_ROWS_SERVED, "plan_rows_served",
     [](const Snap& s) -> U64 { return s.plans.rows_served; }},
    {NS_STAT_MOVED_BYTES, "moved_bytes", [](const Snap& s) -> U64 { return s.frames.frame_bytes; }},
    {NS_STAT_COMPACT_PACKETS, "compact_packets",
     [](const Snap& s) -> U64 { return s.client.compact_packets + s.server.compact_packets; }},
    {NS_STAT_COMPACT_BYTES, "compact_bytes",
     [](const Snap& s) -> U64 { return s.client.compact_bytes + s.server.compact_bytes; }},
    {NS_STAT_SCATTER_RECORDS, "scatter_records",
     [](const Snap& s) -> U64 { return s.scatters.records; }},
    {NS_STAT_SCATTER_COMBINED, "scatter_combined",
     [](const Snap& s) -> U64 { return s.scatters.combined; }},
    {NS_STAT_SCATTER_LOCAL, "scatter_local", [](const Snap& s) -> U64 { return s.scatters.local; }},
    {NS_STAT_SCATTER_SENT, "scatter_sent", [](const Snap& s) -> U64 { return s.scatters.sent; }},
    {NS_STAT_SCATTER_PACKETS, "scatter_packets",
     [](const Snap& s) -> U64 { return s.scatters.packets_out; }},
    {NS_STAT_SCATTER_BYTES, "scatter_bytes",
     [](const Snap& s) -> U64 { return s.scatters.bytes_out; }},
    {NS_STAT_SCATTER_APPLIED, "scatter_applied",
     [](const Snap& s) -> U64 { return s.scatters.applied; }},
    {NS_STAT_COMMANDS_ACTIVE, "commands_active",
     [](const Snap& s) -> U64 { return s.commands_active; }},
    {NS_STAT_FILTER_COMMANDS, "filter_commands",
     [](const Snap& s) -> U64 { return s.filter_commands; }},
    {NS_STAT_WC_BACKLOG, "wc_backlog", [](const Snap& s) -> U64 { return s.wc_backlog; }},
    {NS_STAT_PRS_IN_FLIGHT, "prs_in_flight", [](const Snap& s) -> U64 { return s.prs_in_flight; }},
    {NS_STAT_PRS_BUFFERED, "prs_buffered", [](const Snap& s) -> U64 { return s.prs_buffered; }},
    {NS_STAT_FRAMES_QUEUED, "frames_queued", [](const Snap& s) -> U64 { return s.frames_queued; }},
};
static_assert(std::size(kStats) == NS_STAT__COUNT, "one row per ns_stat");
constexpr bool stats_in_enum_order() {
  for (int i = 0; i < NS_STAT__COUNT; ++i) {
    if (kStats[i].which != i) return false;
  }
  return true;
}
static_assert(stats_in_enum_order(), "kStats lists the statistics in ns_stat order");

double prs_per_packet(const Engine::Snapshot& s) {
  const auto& c = s.concat;
  const std::uint64_t packets = c.packets[0] + c.packets[1];
  return packets == 0 ? 0.0
                      : static_cast<double>(c.prs[0] + c.prs[1]) / static_cast<double>(packets);
}
}  // namespace

extern "C" const char* ns_stat_name(int which) {
  if (which < 0 || which >= NS_STAT__COUNT) return nullptr;
  return kStats[which].name;
}

extern "C" uint64_t ns_stat_get(const ns_context* ctx, int which) {
  if (!live(ctx, HandleKind::kContext) || which < 0 || which >= NS_STAT__COUNT) return 0;
  try {
    return kStats[which].value(ctx->snapshot());
  } catch (...) {
    return 0;
  }
}

extern "C" double ns_stat_prs_per_packet(const ns_context* ctx) {
  if (!live(ctx, HandleKind::kContext)) return 0.0;
  try {
    return prs_per_packet(ctx->snapshot());
  } catch (...) {
    return 0.0;
  }
}

extern "C" void ns_stats_reset(ns_context* ctx) {
  if (!live(ctx, HandleKind::kContext)) return;
  try {
    ctx->reset_stats();
  } catch (...) {
  }
}

namespace {

// The configuration table's variables with the values in effect (config/settings.hpp): the
// default when unset, the raw text when it is malformed (the context opened before it was set).
nlohmann::ordered_json environment_json() {
  namespace cf = netsparse::config;
  nlohmann::ordered_json j = nlohmann::ordered_json::object();
  for (int i = 0; i < static_cast<int>(cf::Env::kCount); ++i) {
    const auto e = static_cast<cf::Env>(i);
    std::string value;
    try {
      value = cf::effective(e);
    } catch (const std::invalid_argument&) {
      value = cf::raw(e);
    }
    j[cf::setting(e).name] = value;
  }
  return j;
}

double ratio(std::uint64_t num, std::uint64_t den) {
  return den == 0 ? 0.0 : static_cast<double>(num) / static_cast<double>(den);
}

// ns_stats_json's document; ordered_json keeps the fields in the order they have always had.
nlohmann::ordered_json stats_document(const ns_context* ctx) {
  const Engine::Snapshot s = ctx->snapshot();
  const Config& cfg = ctx->config();
  nlohmann::ordered_json j;
  j["version"] = NETSPARSE_VERSION_STRING;
  j["rank"] = ctx->rank();
  j["size"] = ctx->size();
  j["transport"] = ctx->transport_name();
  j["transport_detail"] = ctx->transport_detail();
  j["config"] = {{"client_units", cfg.client_units},
                 {"server_units", cfg.server_units},
                 {"progress", cfg.progress_mode == NS_PROGRESS_INLINE ? "inline" : "thread"},
                 {"progress_reason", cfg.progress_reason},
                 {"standby_us", cfg.standby_us},
                 {"packet_bytes", cfg.packet_bytes},
                 {"concat_delay_ns", cfg.delay_ns},
                 {"pending_entries", cfg.pending_entries},
                 {"watchdog_ms", cfg.watchdog_ms},
                 {"idx_chunk", cfg.idx_chunk},
                 {"filter", cfg.filter_on()},
                 {"coalesce", cfg.coalesce_on()},
                 {"concat", cfg.concat_on()},
                 {"virtual_queues", cfg.virtual_queues},
                 {"wire", cfg.compact_wire() ? "compact" : "paper"}};
  j["environment"] = environment_json();
  nlohmann::ordered_json& stats = j["stats"] = nlohmann::ordered_json::object();
  for (const Stat& st : kStats) stats[st.name] = st.value(s);
  // Not NS_STAT_* values: they describe the progress model, not the protocol.
  stats["standby_takeovers"] = s.standby_takeovers;
  stats["standby_steps"] = s.standby_steps;
  stats["standby_wakes"] = s.standby_wakes;
  j["prs_per_packet"] = prs_per_packet(s);
  j["read_prs_per_packet"] = s.concat.prs_per_packet(0);
  j["response_prs_per_packet"] = s.concat.prs_per_packet(1);
  j["fc_rate"] = ratio(s.client.filtered + s.client.coalesced, s.client.requested);
  static_assert(netsparse::concat::kNumFlushCauses == 5, "one JSON field per flush cause");
  j["flushes"] = {{"full", s.concat.flushes[0]},
                  {"expired", s.concat.flushes[1]},
                  {"explicit", s.concat.flushes[2]},
                  {"pool_pressure", s.concat.flushes[3]},
                  {"unqueued", s.concat.flushes[4]}};
  const int inv = netsparse::concat::type_index(netsparse::concat::PrType::kInvalid);
  const int ctl = netsparse::concat::type_index(netsparse::concat::PrType::kControl);
  j["signals"] = {{"invalid_packets", s.concat.packets[inv]},
                  {"invalid_bytes", s.concat.wire_bytes[inv]},
                  {"control_packets", s.concat.packets[ctl]},
                  {"control_bytes", s.concat.wire_bytes[ctl]}};
  j["frames"] = {{"sent", s.frames.frames},
                 {"packets", s.frames.frame_packets},
                 {"bytes", s.frames.frame_bytes},
                 {"packets_per_frame", ratio(s.frames.frame_packets, s.frames.frames)},
                 {"retries", s.frames.retries},
                 {"dropped", s.frames.dropped},
                 {"received", s.frames_in}};
  if (s.profiled) {
    nlohmann::ordered_json& profile = j["profile"] = {{"steps", s.steps}};
    for (int k = 0; k < 5; ++k)
      profile[std::string(Engine::kStageNames[k]) + "_ns"] = s.stage_ns[k];
  }
  j["engine"] = {{"completions", s.completions},
                 {"packets_in", s.packets_in},
                 {"control_prs", s.control_prs},
                 {"released_prs", s.client.released},
                 {"stale_waiters", s.client.stale_waiters},
                 {"dedup_skipped", s.client.dedup_skipped},
                 {"transport_bytes_sent", s.tx_bytes}};
  j["region"] = {{"registrations", s.registrations}, {"rebinds", s.rebinds}};
  j["plans"] = {{"installs", s.plans.installs},       {"refused", s.plans.refused},
                {"rows_queued", s.plans.rows_queued}, {"stale", s.plans.stale},
                {"malformed", s.plans.malformed},     {"starts_sent", s.plans.starts_sent},
                {"pushes", s.plans.pushes},           {"pushed_starts", s.plans.pushed_starts},
                {"rows_early", s.plans.rows_early}};
  j["compact"] = {{"rows_queued", s.server.rows_queued}};
  j["scatter"] = {{"refused", s.scatters.refused},
                  {"stale", s.scatters.stale},
                  {"malformed", s.scatters.malformed}};
  return j;
}

}  // namespace

extern "C" int ns_stats_json(const ns_context* ctx, char* buf, size_t len) {
  if (ctx == nullptr || (buf == nullptr && len != 0)) {
    return invalid("ns_stats_json", "ctx is NULL or buf is NULL with len > 0");
  }
  if (!live(ctx, HandleKind::kContext))
    return not_live("ns_stats_json", "ctx", HandleKind::kContext);
  return guarded("ns_stats_json", [&]() -> int {
    // Invalid UTF-8 in a string (a device name, an environment value) is replaced, not thrown.
    const std::string j =
        stats_document(ctx).dump(-1, ' ', false, nlohmann::ordered_json::error_handler_t::replace);
    if (len > 0) {
      const std::size_t n = std::min(len - 1, j.size());
      std::memcpy(buf, j.data(), n);
      buf[n] = '\0';
    }
    return static_cast<int>(j.size());
  });
}

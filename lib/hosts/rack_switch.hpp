// netsparse-node's rack switch (issue 22 item 3): the inter-rack gathers of the host leaders
// pass through one software ToR per rack, the leader of the rack's first host, which runs the
// switch code the emulator runs (sw::TorPipeline: concatenation and the Property Cache).
//
// Every message is a real MPI message on a duplicate of the leaders' communicator (leaders sit
// on different hosts; nothing here goes through shared memory). A message is NetSparse packets
// (lib/concat/protocol.hpp) back to back; idx = a column of B, src_node / dest = host numbers.
//
// One run is H waves (H = hosts per rack). In wave w the w-th host of every rack gathers:
//   A  its leader sends its inter-rack reads (packets per owner host) to its rack's switch;
//   B  the switch looks every read up in its cache (a hit becomes a response for the host), and
//      sends the misses to the other racks' switches, concatenated per destination rack;
//   C  each switch splits the reads it received per owner host and sends them to its hosts;
//   D  each leader answers from its host's rows (packets per requester host) to its switch;
//   E  the switches fill their caches with the passing responses and send them to the
//      requesting rack's switch (per rack); that switch fills its cache too, and
//   F  sends the wave's host its responses (the hits of step B included).
// Waves serialise the hosts of a rack so that what one host fetched is in its switch's cache
// when the next host asks: a row that crossed into a rack once per kernel is served from the
// cache to the rack's other hosts (unless the cache evicted it). The cache is invalidated at the
// start of every run (a kernel is an epoch). Every wait has a deadline: a switch or leader that
// fails or dies makes every other leader throw within it (the caller then fails its host).
// Malformed messages (a truncated packet, an unknown type, a row the host does not own, a row
// that was not asked for or came twice) are refused with an exception; nothing is read or
// written outside the store.
#pragma once

#include <mpi.h>

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <utility>
#include <vector>

#include "hosts/topology.hpp"
#include "netsparse/csr.hpp"
#include "switch/tor_pipeline.hpp"

namespace netsparse::dist {

// What one run of the switch path did, at this leader.
struct RackSwitchCounters {
  std::uint64_t lookups = 0, hits = 0;                          // this rank as a switch
  std::uint64_t inter_rack_bytes = 0, inter_rack_messages = 0;  // switch to switch, sent
  std::uint64_t inter_host_bytes = 0, inter_host_messages = 0;  // all it sent to other hosts
  std::uint64_t rows_landed = 0;                                // rows this host received
};

class RackSwitchPath {
 public:
  // Where this host's own rows are: the store row of column c, or UINT64_MAX when the host does
  // not own c.
  using OwnRow = std::function<std::uint64_t(gidx_t c)>;
  // host_of_col(c): the host owning column c (c < n_cols checked by the caller).
  using HostOfCol = std::function<std::uint32_t(gidx_t c)>;

  // Collective over the leaders (the leaders' communicator is duplicated).
  RackSwitchPath(const Topology& topo, gidx_t n_cols, std::uint32_t row_bytes, HostOfCol host_of,
                 OwnRow own_row, std::chrono::milliseconds deadline);
  ~RackSwitchPath();
  RackSwitchPath(const RackSwitchPath&) = delete;
  RackSwitchPath& operator=(const RackSwitchPath&) = delete;

  // Per pattern: this host's inter-rack rows (column, store row), in column order.
  void set_wanted(std::vector<std::pair<gidx_t, std::uint64_t>> wanted);
  [[nodiscard]] std::size_t wanted() const noexcept { return wanted_.size(); }

  // One run (every leader; no collective call). `store` holds the host's rows (read) and
  // receives the wanted rows (row_bytes each); `progress` is called while waiting.
  RackSwitchCounters run(std::byte* store, const std::function<void()>& progress);

 private:
  class Buffers;
  std::vector<std::byte> take(int source, int tag, const std::function<void()>& progress);
  void send(int host, int tag, std::vector<std::byte> message);
  void finish_sends(const std::function<void()>& progress);
  std::vector<std::byte> answer_reads(std::span<const std::byte> reads, const std::byte* store);
  void land_answers(std::span<const std::byte> answers, std::byte* store);
  [[nodiscard]] std::uint32_t queue_of(std::uint32_t host) const;

  const Topology& topo_;
  MPI_Comm comm_ = MPI_COMM_NULL;
  gidx_t n_cols_ = 0;
  std::uint32_t row_bytes_ = 0;
  HostOfCol host_of_;
  OwnRow own_row_;
  std::chrono::milliseconds deadline_;
  int hosts_per_rack_ = 1;
  std::vector<std::pair<gidx_t, std::uint64_t>> wanted_;
  std::unique_ptr<Buffers> out_;               // the switch pipeline's packets per queue
  std::unique_ptr<sw::TorPipeline> pipeline_;  // this rank is its rack's switch
  std::vector<MPI_Request> sends_;
  std::vector<std::vector<std::byte>> sending_;
  // Receive buffers of messages a dead sender never finished (take): kept for the life of the
  // path, since their requests stay pending.
  std::vector<std::vector<std::byte>> abandoned_;
  RackSwitchCounters counters_;
};

}  // namespace netsparse::dist

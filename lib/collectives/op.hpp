// The part every collective operation shares (communicator.cpp runs it): the agreement on
// arguments through descriptors, the dispatch of received packets by operation number, packets
// of the next operation kept aside, one staged packet waiting for transport resources, and the
// failures an operation records inside the transport's poll handler (where it must not throw).
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "collectives/communicator.hpp"
#include "collectives/wire.hpp"

namespace netsparse::collectives {

struct Communicator::Op {
  Op(Communicator& c, const wire::Descriptor& mine);
  virtual ~Op();

  // A data packet of this operation from a peer whose descriptor matched ours (so its layout is
  // ours). `packet` is the whole packet, header included; valid during the call only.
  virtual void on_data(int src, const wire::Header& h, std::span<const std::byte> packet) = 0;
  // Sends what can be sent now; true when something was sent.
  virtual bool pump() = 0;
  // Everything this rank must do for the operation is done (descriptors aside).
  virtual bool finished() const = 0;
  // All descriptors arrived and agree (called once, before finished() is asked).
  virtual void on_agreed() {}

  // Sends one packet of `bytes` bytes built by fill(out) straight into the transport's memory
  // when it lends it, else through a staging buffer kept as pending when the transport is busy.
  // false: nothing was sent (busy); call again later with the same packet.
  bool send(int dest, std::size_t bytes, const std::function<void(std::byte*)>& fill);
  // Records a failure; run() throws it after the poll returns.
  void record_failure(Failure f, const std::string& why);
  // Scratch array `id` of at least `bytes` bytes, this operation's own while it lives.
  std::byte* scratch(std::size_t id, std::size_t bytes) { return scratch_set->get(id, bytes); }

  Communicator& comm;
  transport::Transport& tr;
  const int P;
  const int me;
  std::uint32_t seq = 0;
  wire::Descriptor mine;
  bool args_ok;  // this rank's own arguments are valid (its descriptor says so)
  // Declared before the vectors below, which live in it (pooled across operations).
  std::unique_ptr<Communicator::ScratchSet> scratch_set;
  std::vector<wire::Descriptor>& desc;
  std::vector<std::uint8_t>& have_desc;
  std::vector<std::uint8_t>& src_ok;  // the peer's descriptor matches ours: its data counts
  int n_desc = 1;                     // ours
  int desc_sent = 0;                  // peers our descriptor went to
  bool agreed = false;
  bool done = false;  // agreed, everything sent and received: the result is in place
  bool failed = false;
  std::chrono::steady_clock::time_point deadline{};
  Failure failure = Failure::kProtocol;
  std::string failure_reason;
  // The staged packet that the transport refused for lack of resources.
  int pending_dest = -1;
  std::size_t pending_bytes = 0;
};

// The fields ranks must agree on (nnz is per rank).
bool same_arguments(const wire::Descriptor& a, const wire::Descriptor& b) noexcept;
std::string describe(const wire::Descriptor& d);

}  // namespace netsparse::collectives

// Hierarchical allreduce (issue 39 item 1): reduce inside each host first, then across hosts
// between one leader per host, then broadcast down inside the host -- what Flare's rack switch
// does for the ranks below it, with the host leader as the aggregation point of its host.
//
// Two communicators of their own, beside the flat one the rest of the family uses:
//   host     the ranks of this rank's host (rank 0 of it = the leader, the host's lowest rank),
//            over the MPI transport's intra-host shared-memory rings;
//   leaders  one rank per host (rank h = host h's leader), over the inter-host path only (MPI or
//            verbs, never the rings: virtual hosts on one machine must not shortcut it).
// Every byte the leaders' communicator sends crosses hosts; the host communicators' never do.
// With P = r H ranks the flat allreduce moves 2 (P - r) packets of each block between hosts,
// this one 2 (H - 1): 1/r of the flat count, headers included (docs/collectives.md).
//
// With racks (NETSPARSE_HOSTS_PER_RACK: several racks of several hosts), the leaders' step is
// itself a hierarchy, one level up: the leaders of a rack reduce to the rack's switch (its first
// host's leader, the role the node-wide engine's rack switch plays), the switches allreduce
// between racks, and each switch broadcasts down to its rack's leaders: one aggregation per rack,
// as Flare's switch does, so only 2 (R - 1) packets of each block leave the R racks (the
// leaders' flat step sends more across racks; the inter-host bytes stay 2 (H - 1)).
//
// Failures reach every rank: a host step that fails makes its leader refuse the leaders' step
// (LocalError::kHostFailed), a leaders' step that fails makes every leader refuse the broadcast
// down and then broadcast why; the rack level passes failures the same way. Threading: as
// Communicator.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>

#include "collectives/communicator.hpp"

namespace netsparse::collectives {

class Hierarchy {
 public:
  // host: this host's ranks (host->rank() == 0 on the leader); leaders: the host leaders'
  // communicator on a leader, null elsewhere. Sets their host maps for the inter-host count.
  Hierarchy(std::unique_ptr<Communicator> host, std::unique_ptr<Communicator> leaders);
  // The same with racks: on a leader, `racks` is the leaders' step (make_rack_level), null
  // elsewhere.
  Hierarchy(std::unique_ptr<Communicator> host, std::unique_ptr<Hierarchy> racks);
  // The rack level of a leader: rack = the leaders of its rack (rank 0 = the rack's switch),
  // switches = the switches' communicator on a switch, null elsewhere.
  static std::unique_ptr<Hierarchy> make_rack_level(std::unique_ptr<Communicator> rack,
                                                    std::unique_ptr<Communicator> switches);

  bool leader() const noexcept { return leaders_ != nullptr || racks_ != nullptr; }
  Communicator& host() noexcept { return *host_; }
  // The leaders' communicator on a leader without racks (null with racks and off the leaders).
  Communicator* leaders() noexcept { return leaders_.get(); }
  // The rack level on a leader with racks, else null.
  Hierarchy* racks() noexcept { return racks_.get(); }
  void set_timeout_ms(int ms) noexcept;

  // As Communicator::allreduce / sparse_allreduce (the same arguments, checked on every rank,
  // CollectiveError on every rank of every host when anything fails). Reproducible mode: the
  // host's fixed tree, then the leaders' fixed tree (the rack's, then the switches'); with hosts
  // (and racks) of 2^k consecutive ranks (hosts) this is the flat tree's order exactly.
  Algorithm allreduce(const AllreduceArgs& args);
  SparseResult sparse_allreduce(const SparseArgs& args);
  // Non-blocking allreduce through the hierarchy (ns_allreduce_start on a layout of several
  // ranks per host): allreduce()'s steps as non-blocking operations of their levels, each
  // started from test() / wait() once the one before completed. Requests run one after another
  // in the order they were started (a communicator matches operations by order, and overlapping
  // requests would start a level's operations in timing-dependent orders); they may be tested
  // in any order. The buffers as Communicator::start_allreduce's. A blocking call on the
  // hierarchy first completes the requests outstanding (their results or failures wait for
  // their test / wait).
  std::uint32_t start_allreduce(const AllreduceArgs& args);
  // True once `id` completed (its id is then released); CollectiveError as allreduce().
  bool test(std::uint32_t id);
  void wait(std::uint32_t id);
  std::size_t outstanding() const noexcept { return requests_.size(); }

  // The last call's: bytes_sent over every communicator, inter_host_bytes and inter_rack_bytes.
  const OpStats& last_stats() const noexcept { return stats_; }

 private:
  // What the two levels are called in the errors every rank sees.
  struct Names {
    const char* lower;  // "this host (rank = rank in the host)"
    const char* upper;  // "the host leaders (rank = host)"
  };
  Hierarchy(std::unique_ptr<Communicator> lower, std::unique_ptr<Communicator> leaders,
            std::unique_ptr<Hierarchy> racks, Names names, bool lower_is_one_host);

  void add_stats(const OpStats& s);
  void add_upper_stats();
  // The leaders' step: the leaders' communicator or the rack level.
  Algorithm upper_allreduce(const AllreduceArgs& args);
  SparseResult upper_sparse_allreduce(const SparseArgs& args);
  CollectiveError inside(const CollectiveError& e) const;
  CollectiveError above(const CollectiveError& e) const;
  std::string above_reason(const CollectiveError& e) const;
  // After a failed leaders' step (or a refused broadcast down): the leader broadcasts the
  // failure to its host and every rank of the host throws it.
  [[noreturn]] void throw_host_verdict(const CollectiveError* upper, const CollectiveError& down);

  // A non-blocking allreduce: the step it is at and the current step's operation there.
  enum class Stage {
    kQueued,      // behind an earlier request
    kHost,        // the host's reduce to the leader, outstanding
    kHostDone,    // waiting to start the leaders' step (leader) or the broadcast down
    kHostFailed,  // a leader whose host step failed: refuses the leaders' step next
    kRefusing,    // ... that refused step, outstanding
    kUpper,       // the leaders' step, outstanding
    kUpperDone,   // waiting to start the broadcast down
    kDown,        // the broadcast down, outstanding
    kDone,
  };
  struct Request {
    AllreduceArgs args;
    UserOp user;  // args.user points here: the caller's may be gone before a later step starts
    Stage stage = Stage::kQueued;
    std::uint32_t op = 0;
    std::optional<CollectiveError> upper_error;  // the leaders' step's failure
    std::optional<CollectiveError> error;        // what test() throws
  };
  // Moves every request on as far as its steps' operations allow, in request order.
  void advance();
  void step(Request& r);
  template <class Start>
  void start_inside(Request& r, Stage next, Start&& start) const;
  // The steps' arguments, shared by allreduce() and the requests: the host's reduce to its
  // leader; the leaders' step, in place in recv (`refuse`: refused, the host's step failed).
  AllreduceArgs host_step_args(const AllreduceArgs& args) const;
  static AllreduceArgs leaders_step_args(const AllreduceArgs& args, bool refuse);
  std::uint32_t upper_start(const AllreduceArgs& args);
  bool upper_test(std::uint32_t id);
  // Completes every request outstanding (before a blocking call on the same communicators).
  void finish_requests();
  // The failure every rank of the host throws after a refused broadcast down (as
  // throw_host_verdict, returned instead of thrown).
  CollectiveError host_verdict(const CollectiveError* upper, const CollectiveError& down);
  std::map<std::uint32_t, Request> requests_;
  std::uint32_t next_request_ = 1;

  std::unique_ptr<Communicator> host_, leaders_;
  std::unique_ptr<Hierarchy> racks_;
  Names names_;
  // The rack level reduces to its switch and broadcasts from it as a star (Flare's switch: every
  // leader's whole vector to it, the result from it); the host level spreads the blocks over the
  // host's ranks (shared memory, so the work is what counts there, not the bytes).
  bool star_ = false;
  OpStats stats_;
};

}  // namespace netsparse::collectives

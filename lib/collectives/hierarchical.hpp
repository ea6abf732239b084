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
// Failures reach every rank: a host step that fails makes its leader refuse the leaders' step
// (LocalError::kHostFailed), a leaders' step that fails makes every leader refuse the broadcast
// down and then broadcast why. Threading: as Communicator.
#pragma once

#include <memory>
#include <string>

#include "collectives/communicator.hpp"

namespace netsparse::collectives {

class Hierarchy {
 public:
  // host: this host's ranks (host->rank() == 0 on the leader); leaders: the host leaders'
  // communicator on a leader, null elsewhere. Sets their host maps for the inter-host count.
  Hierarchy(std::unique_ptr<Communicator> host, std::unique_ptr<Communicator> leaders);

  bool leader() const noexcept { return leaders_ != nullptr; }
  Communicator& host() noexcept { return *host_; }
  Communicator* leaders() noexcept { return leaders_.get(); }
  void set_timeout_ms(int ms) noexcept;

  // As Communicator::allreduce / sparse_allreduce (the same arguments, checked on every rank,
  // CollectiveError on every rank of every host when anything fails). Reproducible mode: the
  // host's fixed tree, then the leaders' fixed tree; with hosts of 2^k consecutive ranks this is
  // the flat tree's order exactly (the same bits).
  Algorithm allreduce(const AllreduceArgs& args);
  SparseResult sparse_allreduce(const SparseArgs& args);

  // The last call's: bytes_sent over both communicators, inter_host_bytes (the leaders').
  const OpStats& last_stats() const noexcept { return stats_; }

 private:
  void add_stats(const Communicator& c);
  // After a failed leaders' step (or a refused broadcast down): the leader broadcasts the
  // failure to its host and every rank of the host throws it.
  [[noreturn]] void throw_host_verdict(const CollectiveError* upper, const CollectiveError& down);

  std::unique_ptr<Communicator> host_, leaders_;
  OpStats stats_;
};

}  // namespace netsparse::collectives

// Hosts and racks of an MPI job (issue 22 item 1): which ranks share a host (a node, one NIC in
// the paper's setting), which rank leads each host, and which hosts share a rack. The node-aware
// modes route their traffic by it: intra-host through the host's communicator, inter-host only
// between the leaders' communicator.
//
// Hosts are discovered with MPI_Comm_split_type(MPI_COMM_TYPE_SHARED). For tests and one-machine
// benchmarks, NETSPARSE_RANKS_PER_HOST=n cuts the job into virtual hosts of n consecutive ranks
// (np 4, n = 2: hosts {0,1} and {2,3}); each virtual host must lie inside one real host.
// Racks: NETSPARSE_HOSTS_PER_RACK=m groups m consecutive hosts (default: one rack of all hosts).
// A virtual host is a host for every purpose: traffic between two virtual hosts goes through
// MPI messages between their leaders, so the counters mean what they would on a cluster.
#pragma once

#include <mpi.h>

#include <exception>
#include <string>
#include <vector>

namespace netsparse::dist {

// The overrides; 0 = not set (discover hosts / one rack).
struct TopologyOverrides {
  int ranks_per_host = 0;
  int hosts_per_rack = 0;

  // The only place that reads the environment (NETSPARSE_RANKS_PER_HOST,
  // NETSPARSE_HOSTS_PER_RACK). Throws std::invalid_argument for a value that is not a positive
  // integer -- on this rank only: Topology::build agrees on it with the others.
  static TopologyOverrides from_environment();
};

// One rank's view of the job's hosts and racks. Move-only: owns the host and leaders'
// communicators.
class Topology {
 public:
  // Collective over `comm`. Every rank passes its overrides (from_environment()); a layout the
  // ranks disagree on, a rank count that is not a multiple of the ranks per host, a host count
  // that is not a multiple of the hosts per rack, a virtual host spanning two real hosts, or a
  // bad environment value on any rank are refused on EVERY rank with the same
  // std::invalid_argument (one message naming the problem).
  static Topology build(MPI_Comm comm, const TopologyOverrides& overrides);
  // Same, with TopologyOverrides::from_environment() (its errors agreed on too).
  static Topology build(MPI_Comm comm);

  Topology() = default;
  ~Topology();
  Topology(Topology&& other) noexcept;
  Topology& operator=(Topology&& other) noexcept;
  Topology(const Topology&) = delete;
  Topology& operator=(const Topology&) = delete;

  [[nodiscard]] int rank() const noexcept { return rank_; }
  [[nodiscard]] int nranks() const noexcept { return static_cast<int>(host_of_rank_.size()); }
  [[nodiscard]] int host() const noexcept { return host_of_rank_[rank_]; }
  [[nodiscard]] int nhosts() const noexcept { return static_cast<int>(leader_of_host_.size()); }
  [[nodiscard]] int rack() const noexcept { return rack_of_host_[host()]; }
  [[nodiscard]] int nracks() const noexcept { return nracks_; }
  [[nodiscard]] bool virtual_hosts() const noexcept { return virtual_; }
  // The job's ranks on this rank's machine (sharing memory with it), whatever the virtual hosts.
  [[nodiscard]] int ranks_on_machine() const noexcept { return machine_ranks_; }
  // Whether every rank of the job may run on as many cores as its machine has ranks (its
  // affinity mask), so that parallel work per rank really runs in parallel (netsparse-node's
  // engines per rank, NETSPARSE_NODE_ENGINES=auto). The same on every rank.
  [[nodiscard]] bool cores_for_every_rank() const noexcept { return cores_for_every_rank_; }
  // Host / rack of any rank / host of `comm`, and each host's leader (its lowest rank).
  [[nodiscard]] int host_of(int rank) const { return host_of_rank_.at(rank); }
  [[nodiscard]] int rack_of_host(int host) const { return rack_of_host_.at(host); }
  [[nodiscard]] int leader_of(int host) const { return leader_of_host_.at(host); }
  [[nodiscard]] bool is_leader() const noexcept { return leader_of_host_[host()] == rank_; }
  // Ranks of `host`, ascending (rank of `comm` each); position in it = rank in host_comm().
  [[nodiscard]] const std::vector<int>& ranks_of(int host) const { return ranks_of_host_.at(host); }
  // The ranks of this host (leader = rank 0 of it), and the leaders of all hosts (rank h = the
  // leader of host h; MPI_COMM_NULL on the other ranks).
  [[nodiscard]] MPI_Comm host_comm() const noexcept { return host_comm_; }
  [[nodiscard]] MPI_Comm leaders_comm() const noexcept { return leaders_comm_; }
  // "4 ranks = 2 hosts x 2 ranks (virtual: NETSPARSE_RANKS_PER_HOST=2), 1 rack".
  [[nodiscard]] std::string describe() const;

 private:
  static Topology build(MPI_Comm comm, const TopologyOverrides& overrides,
                        std::exception_ptr own_error);
  void release() noexcept;

  int rank_ = 0;
  bool cores_for_every_rank_ = true;
  bool virtual_ = false;
  int nracks_ = 1;
  int machine_ranks_ = 1;
  std::vector<int> host_of_rank_, leader_of_host_, rack_of_host_;
  std::vector<std::vector<int>> ranks_of_host_;
  MPI_Comm host_comm_ = MPI_COMM_NULL, leaders_comm_ = MPI_COMM_NULL;
};

}  // namespace netsparse::dist

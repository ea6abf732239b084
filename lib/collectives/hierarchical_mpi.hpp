// Building a Hierarchy (hierarchical.hpp) over MPI: the host's and the leaders' communicators
// from the job's Topology (lib/hosts), each on a transport of its own.
#pragma once

#include <functional>
#include <memory>

#include "collectives/hierarchical.hpp"
#include "hosts/topology.hpp"
#include "transport/transport_factory.hpp"

namespace netsparse::collectives {

// Whether allreduce and sparse allreduce go through a Hierarchy: NETSPARSE_COLL_HIERARCHY
// (flat, hierarchical, hosts, or auto: when there are several hosts and some host has several
// ranks).
bool hierarchy_wanted(const dist::Topology& topology);
// Whether the leaders' step goes through the racks' switches: several racks of several hosts
// (NETSPARSE_HOSTS_PER_RACK), unless NETSPARSE_COLL_HIERARCHY=hosts.
bool rack_level_wanted(const dist::Topology& topology);

// A test seam: wraps each transport made (fault injection), told whether it is the leaders'
// (inter-host) one; identity when empty.
using TransportWrap = std::function<std::unique_ptr<transport::Transport>(
    std::unique_ptr<transport::Transport>, bool inter_host)>;

// Collective over the topology's communicator. The host's communicator runs on the MPI
// transport with its intra-host shared-memory rings; the leaders' (or, with the rack level,
// each rack's leaders' and the switches') on `inter_host` (MPI or verbs) without the rings, so
// that virtual hosts on one machine still talk over MPI.
std::unique_ptr<Hierarchy> make_hierarchy(const dist::Topology& topology,
                                          transport::TransportKind inter_host,
                                          const Options& options, const TransportWrap& wrap = {});

// Every rank's host and rack, for Communicator::set_hosts / set_racks of the flat communicator.
std::vector<int> hosts_of_ranks(const dist::Topology& topology);
std::vector<int> racks_of_ranks(const dist::Topology& topology);

}  // namespace netsparse::collectives

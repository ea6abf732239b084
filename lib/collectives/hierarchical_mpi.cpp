// Building a Hierarchy over MPI (hierarchical_mpi.hpp).
#include "collectives/hierarchical_mpi.hpp"

#include "config/settings.hpp"

namespace netsparse::collectives {

bool hierarchy_wanted(const dist::Topology& topology) {
  const std::string mode = config::choice(config::Env::kCollHierarchy);
  if (mode == "flat") return false;
  if (mode == "hierarchical") return true;
  return topology.nhosts() > 1 && topology.nhosts() < topology.nranks();
}

std::unique_ptr<Hierarchy> make_hierarchy(const dist::Topology& topology,
                                          transport::TransportKind inter_host,
                                          const Options& options, const TransportWrap& wrap) {
  const auto wrapped = [&](std::unique_ptr<transport::Transport> t, bool across_hosts) {
    return wrap ? wrap(std::move(t), across_hosts) : std::move(t);
  };
  transport::TransportOptions inside;
  inside.host_rings = true;
  auto host = std::make_unique<Communicator>(
      wrapped(
          transport::make_transport(transport::TransportKind::kMpi, topology.host_comm(), inside),
          false),
      options);
  std::unique_ptr<Communicator> leaders;
  if (topology.is_leader()) {
    transport::TransportOptions across;
    across.host_rings = false;  // between hosts: never through shared memory
    leaders = std::make_unique<Communicator>(
        wrapped(transport::make_transport(inter_host, topology.leaders_comm(), across), true),
        options);
  }
  return std::make_unique<Hierarchy>(std::move(host), std::move(leaders));
}

std::vector<int> hosts_of_ranks(const dist::Topology& topology) {
  std::vector<int> hosts(static_cast<std::size_t>(topology.nranks()));
  for (int r = 0; r < topology.nranks(); ++r)
    hosts[static_cast<std::size_t>(r)] = topology.host_of(r);
  return hosts;
}

}  // namespace netsparse::collectives

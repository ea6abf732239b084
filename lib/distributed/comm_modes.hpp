// How CommMode::netsparse resolves by the job's layout (comm_modes.cpp), for DistKernel's
// constructor.
#pragma once

#include "hosts/topology.hpp"
#include "netsparse/distributed.hpp"

namespace netsparse::dist {

// Whether CommMode::netsparse needs the job's layout to resolve (the same on every rank).
[[nodiscard]] bool resolves_by_layout(const DistOptions& options, bool engine_given) noexcept;
[[nodiscard]] HostLayout layout_of(const Topology& topo);
// netsparse-node when several hosts and some host has several ranks, else netsparse-rank.
[[nodiscard]] CommMode resolve_by_layout(const HostLayout& l) noexcept;
// The modes that route or count by host: their kernel builds the job's Topology once.
[[nodiscard]] bool routes_by_host(CommMode mode) noexcept;

}  // namespace netsparse::dist

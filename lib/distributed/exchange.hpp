// A communication mode of DistKernel: the Exchange interface (one class per mode, chosen once
// at construction, in lib/distributed/modes/) and the modes' factories.
// Byte accounting: every mode prices its wire bytes with the one wire model
// (concat/wire_model.hpp: MPI messages, NetSparse packets, the paper's lone PR).
#pragma once

#include <memory>
#include <span>

#include "distributed/compute.hpp"
#include "distributed/pattern.hpp"
#include "distributed/run_context.hpp"
#include "netsparse/distributed.hpp"

namespace netsparse::dist {

// The part of an exchange that does not depend on the precision (setup moves no operand).
class ExchangeBase {
 public:
  virtual ~ExchangeBase() = default;
  // Whether the mode computes the remote part panel by panel (remote_part / remote_panels);
  // otherwise only remote_csr is built and the mode tiles it its own way.
  [[nodiscard]] virtual bool needs_remote_panels() const noexcept { return true; }
  // Whether the mode computes on the caller's CSR rows directly (Pattern::direct).
  [[nodiscard]] virtual bool direct_csr() const noexcept { return false; }
  // The pattern changed (collective).
  virtual void setup(const Pattern& pat, const RunContext& rc) = 0;
  // Local, before this rank enters a run (inside DistKernel's argument agreement, once the
  // arguments checked out here): the run's operand block is `operand`. A mode whose peers read
  // this rank's operand through a registration points it there now, while no peer can read it
  // yet (they only post once every rank has entered the run); a moved operand then needs no
  // collective. Default: nothing.
  virtual void bind_operand(const void* operand, const RunContext& rc) {
    (void)operand;
    (void)rc;
  }
};

template <class T>
class Exchange : public ExchangeBase {
 public:
  // One collective run; adds to `stats`.
  virtual void run(const Pattern& pat, const RunContext& rc, const Operands<T>& ops,
                   Compute<T>& compute, CommStats& stats) = 0;
  // ideal only.
  virtual void replicate(const RunContext& rc, std::span<const T> operand_local);
};

// Defines the factory `name<T>()` of the exchange class template `Class` of a mode's file (in
// its anonymous namespace) and instantiates it for float and double; used at the end of each
// exchange_*.cpp, after the class, inside namespace netsparse::dist.
#define NETSPARSE_EXCHANGE_FACTORY(name, Class)            \
  template <class T>                                       \
  std::unique_ptr<Exchange<T>> name() {                    \
    return std::make_unique<Class<T>>();                   \
  }                                                        \
  template std::unique_ptr<Exchange<float>> name<float>(); \
  template std::unique_ptr<Exchange<double>> name<double>()

template <class T>
std::unique_ptr<Exchange<T>> make_su_exchange();
template <class T>
std::unique_ptr<Exchange<T>> make_su_panel_exchange();
template <class T>
std::unique_ptr<Exchange<T>> make_ideal_exchange();
template <class T>
std::unique_ptr<Exchange<T>> make_ie_exchange();
// node-aware-ie (exchange_node_ie.cpp): the three-step node-aware exchange over the job's hosts
// (Topology::build(comm), overridable by NETSPARSE_RANKS_PER_HOST / NETSPARSE_HOSTS_PER_RACK).
template <class T>
std::unique_ptr<Exchange<T>> make_node_ie_exchange();
// netsparse-node (exchange_node_rig.cpp): node-wide NetSparse over the same hosts: one Idx
// Filter and property store per host in shared memory, one RIG engine per host at its leader.
template <class T>
std::unique_ptr<Exchange<T>> make_node_rig_exchange();
template <class T>
std::unique_ptr<Exchange<T>> make_conveyor_exchange(bool prefilter);
// task-packets (exchange_task.cpp): per owner, task packets (the sparse work sent to the owner,
// partial sums back) where they move fewer bytes than fetching its rows, else the rows.
template <class T>
std::unique_ptr<Exchange<T>> make_task_exchange();
// How the RIG engine modes gather.
enum class RigVariant {
  vanilla,  // sa-vanilla: one NS_WR_RDMA_READ per remote nonzero
  panels,   // the per-nonzero idx stream per column panel, INDEXED (RigIdxSource::nonzeros)
  compact,  // a fixed pattern: the distinct remote columns into a compact buffer, POSITIONAL
            // (RigIdxSource::unique_columns), as gather plans unless DistOptions::plans is off
  direct,   // DistOptions::dynamic_pattern: the CSR's own column array, NS_SEND_REMOTE_ONLY
};
template <class T>
std::unique_ptr<Exchange<T>> make_rig_exchange(std::shared_ptr<RigEngine> engine,
                                               RigVariant variant);

}  // namespace netsparse::dist

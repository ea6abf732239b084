// The local computation every mode shares: the kernel dispatch of a run's parts (whole, local,
// remote panels, a renumbered remote matrix) and SDDMM's scatter back to CSR order
// (compute.cpp).
#pragma once

#include <vector>

#include "distributed/pattern.hpp"
#include "distributed/run_context.hpp"
#include "netsparse/local_kernels.hpp"

namespace netsparse::dist {

// Compute helpers shared by the modes (kernel dispatch + the SDDMM scatter buffers).
template <class T>
class Compute {
 public:
  // Everything at once when every operand row is at hand (`full` holds all n_cols rows): the
  // same computation as the gathering modes, without communication (ideal, su).
  void all_present(const Pattern& pat, const RunContext& rc, const Operands<T>& ops, const T* full);
  // The local part, in place on the operand's local block (first call of a split run: it
  // initializes the output).
  void local(const Pattern& pat, const RunContext& rc, const Operands<T>& ops);
  // One column panel of remote_part with a view of the gathered rows (accumulates).
  void remote_panel(const Pattern& pat, const RunContext& rc, const Operands<T>& ops, int panel,
                    BasicDenseConstView<T> view);
  // All of a (renumbered) remote matrix at once (inspector-executor's compact ghost matrix).
  void remote_all(const TiledMatrix& remote, const RunContext& rc, const Operands<T>& ops,
                  BasicDenseConstView<T> view);
  // Last call of a split run (SDDMM: scatters the two parts into CSR order).
  void finish(const Pattern& pat, const RunContext& rc, const Operands<T>& ops);

 private:
  std::vector<T> local_out_, remote_out_;  // SDDMM outputs of the split parts
};

}  // namespace netsparse::dist

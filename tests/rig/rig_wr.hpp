// The RIG work request every RIG test posts (no GoogleTest dependency: the standalone MPI test
// programs use it too).
#pragma once

#include <cstdint>
#include <vector>

#include "netsparse/netsparse.h"

namespace rigtest {

// A RIG of idx (read by the engine until completion) into out; INDEXED layouts take the window.
// The tests size every output for what they gather; out_bytes = UINT64_MAX vouches for that
// (tests of the length check set wr.rig.out_bytes themselves).
inline ns_send_wr rig_wr(std::uint64_t id, ns_mr* mr, const std::uint64_t* idx, std::uint64_t count,
                         void* out, int layout = NS_RIG_LAYOUT_POSITIONAL,
                         std::uint64_t window_base = 0, std::uint64_t window_len = 0,
                         unsigned flags = NS_SEND_SIGNALED) {
  ns_send_wr w{};
  w.wr_id = id;
  w.opcode = NS_WR_RIG;
  w.send_flags = flags;
  w.wr.rig.mr = mr;
  w.wr.rig.idx = idx;
  w.wr.rig.count = count;
  w.wr.rig.out = out;
  w.wr.rig.layout = layout;
  w.wr.rig.window_base = window_base;
  w.wr.rig.window_len = window_len;
  w.wr.rig.out_bytes = UINT64_MAX;
  return w;
}

inline ns_send_wr rig_wr(std::uint64_t id, ns_mr* mr, const std::vector<std::uint64_t>& idx,
                         void* out, int layout = NS_RIG_LAYOUT_POSITIONAL,
                         std::uint64_t window_base = 0, std::uint64_t window_len = 0,
                         unsigned flags = NS_SEND_SIGNALED) {
  return rig_wr(id, mr, idx.data(), idx.size(), out, layout, window_base, window_len, flags);
}

}  // namespace rigtest

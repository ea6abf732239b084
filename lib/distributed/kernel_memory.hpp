// A DistKernel's memory check: the operand rows a rank will hold, estimated before the engine,
// the pattern or any buffer is built (issue 37 item 4). Internal to lib/distributed.
#pragma once

#include "netsparse/distributed.hpp"

namespace netsparse {

// Throws support::OutOfMemory (naming the bytes and what they are for) when this rank's operand
// rows for a K-wide kernel in options.mode cannot fit in the memory available; K < 1 is left to
// the caller's argument checks.
void check_operand_memory(const DistMatrix& a, int k, const DistOptions& o);

}  // namespace netsparse

// The engine's name for the idle back-off of polling loops, which lives in lib/support (the
// collectives use it too, without the engine).
#pragma once

#include "support/backoff.hpp"

namespace netsparse::rig {

using support::Backoff;
using support::cpu_relax;

}  // namespace netsparse::rig

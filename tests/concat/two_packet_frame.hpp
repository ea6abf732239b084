// The frame check every packet family's round-trip test ends with.
#pragma once

#include <gtest/gtest.h>

#include <cstddef>
#include <span>
#include <vector>

#include "concat/frame.hpp"

namespace netsparse::concat::testing {

// A frame of two copies of packet p splits back into exactly those two (the second one whole).
inline void expect_two_packet_frame_splits(const std::vector<std::byte>& p) {
  std::vector<std::byte> frame(p);
  frame.insert(frame.end(), p.begin(), p.end());
  std::span<const std::byte> parts[4];
  const FrameSplit s = split_frame(frame, parts);
  ASSERT_EQ(s.error, DecodeError::kOk);
  EXPECT_EQ(s.packets, 2u);
  EXPECT_EQ(parts[1].size(), p.size());
}

}  // namespace netsparse::concat::testing

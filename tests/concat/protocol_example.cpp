// Prints the hex dump of the example packet of docs/protocol.md (16 bytes per line, offsets).
#include <cstdio>

#include "example_packet.hpp"

int main() {
  const auto bytes = netsparse::concat::example::build_packet();
  for (std::size_t i = 0; i < bytes.size(); i += 16) {
    std::printf("%04zx:", i);
    for (std::size_t j = i; j < i + 16 && j < bytes.size(); ++j) {
      std::printf(" %02x", static_cast<unsigned>(bytes[j]));
    }
    std::printf("\n");
  }
  return bytes.empty() ? 1 : 0;
}

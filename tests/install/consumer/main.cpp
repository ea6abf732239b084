// Links against the installed libnetsparse and exercises one call from each public layer that
// exists, so a broken install (missing header, unexported symbol, wrong RPATH) fails here. It
// includes the whole C++ API (<netsparse.hpp>, C++20) and is built by projects that choose no
// C++ standard: the standard must come with the package (cxx_std_20, pkg-config's Cflags).
#include <cstdio>
#include <cstring>
#include <netsparse.hpp>

#include "netsparse/config.h"

extern "C" const char* ns_version_string(void);

int main() {
  const char* v = ns_version_string();
  if (std::strcmp(v, NETSPARSE_VERSION_STRING) != 0) {
    std::fprintf(stderr, "version mismatch: library %s, headers %s\n", v, NETSPARSE_VERSION_STRING);
    return 1;
  }
  const auto part = netsparse::RowPartition::equal_blocks(10, 3);  // C++20 headers, linked code
  if (part.size(0) != 4 || part.owner(9) != 2) {
    std::fprintf(stderr, "RowPartition::equal_blocks(10, 3) is wrong\n");
    return 1;
  }
  std::printf("netsparse %s consumer OK\n", v);
  return 0;
}

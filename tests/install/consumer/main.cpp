// Links against the installed libnetsparse and exercises one call from each public layer that
// exists, so a broken install (missing header, unexported symbol, wrong RPATH) fails here.
#include <cstdio>
#include <cstring>

#include "netsparse/config.h"

extern "C" const char* ns_version_string(void);

int main() {
  const char* v = ns_version_string();
  if (std::strcmp(v, NETSPARSE_VERSION_STRING) != 0) {
    std::fprintf(stderr, "version mismatch: library %s, headers %s\n", v, NETSPARSE_VERSION_STRING);
    return 1;
  }
  std::printf("netsparse %s consumer OK\n", v);
  return 0;
}

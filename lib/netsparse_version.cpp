// The shared library's own translation unit: the version query. Everything else comes from
// the component archives linked whole into libnetsparse.
#include "netsparse/config.h"

extern "C" const char* ns_version_string(void) {
  return NETSPARSE_VERSION_STRING;
}

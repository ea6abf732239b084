// Symbol visibility for the shared library. The public classes keep their implementation behind
// a pointer to a nested `Impl`; the version script (lib/netsparse.map) exports every member of a
// public class by pattern, and a nested class's members match it too. Marking each `Impl` hidden
// keeps them out of the dynamic symbol table (the library's own code is their only caller), so
// the ABI is what include/netsparse/ declares and nothing that may change with the internals.
#pragma once

#if defined(__GNUC__) || defined(__clang__)
#define NETSPARSE_LOCAL __attribute__((visibility("hidden")))
#else
#define NETSPARSE_LOCAL
#endif

// The local kernels' loops compiled for the "baseline" instruction set (flags:
// lib/kernels/CMakeLists.txt).
#define NETSPARSE_KERNEL_TABLE kernels_baseline
#define NETSPARSE_KERNEL_ISA_NAME "baseline"
#include "kernels/kernels_impl.inc"

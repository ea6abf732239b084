// The local kernels' loops compiled for the "avx2" instruction set (flags:
// lib/kernels/CMakeLists.txt).
#define NETSPARSE_KERNEL_TABLE kernels_avx2
#define NETSPARSE_KERNEL_ISA_NAME "avx2"
#include "kernels/kernels_impl.inc"

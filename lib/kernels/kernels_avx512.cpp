// The local kernels' loops compiled for the "avx512" instruction set (flags:
// lib/kernels/CMakeLists.txt).
#define NETSPARSE_KERNEL_TABLE kernels_avx512
#define NETSPARSE_KERNEL_ISA_NAME "avx512"
#include "kernels/kernels_impl.inc"

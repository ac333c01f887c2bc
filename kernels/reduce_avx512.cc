// Vectorised reducer built for avx512; see reduce_simd.h and meson.build for the flags.
#define RR_ISA avx512
#include "kernels/reduce_simd.h"

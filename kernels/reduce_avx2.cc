// Vectorised reducer built for avx2; see reduce_simd.h and meson.build for the flags.
#define RR_ISA avx2
#include "kernels/reduce_simd.h"

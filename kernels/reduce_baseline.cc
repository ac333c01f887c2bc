// Vectorised reducer built for baseline; see reduce_simd.h and meson.build for the flags.
#define RR_ISA baseline
#include "kernels/reduce_simd.h"

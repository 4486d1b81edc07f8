// HPU_VECTOR_CLONES: compile a hot elementwise loop three times, for
// baseline x86-64, x86-64-v3 (AVX2, FMA) and x86-64-v4 (AVX-512), and pick
// the copy this CPU runs when the program loads (GCC's target_clones and an
// ifunc). The build itself targets baseline x86-64 (cpu_isa.h); with
// -ffp-contract=off every copy computes the same bits. For plain functions
// (not templates or lambdas); elsewhere (another compiler or CPU) it is empty.
#pragma once

#if defined(__x86_64__) && defined(__GNUC__) && !defined(__clang__)
#define HPU_VECTOR_CLONES __attribute__((target_clones("default", "arch=x86-64-v3", "arch=x86-64-v4")))
#else
#define HPU_VECTOR_CLONES
#endif

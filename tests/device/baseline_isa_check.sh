#!/usr/bin/env bash
# One binary for every x86-64 host: outside the matrix kernels of each
# instruction set (namespaces hpu::device::kernels::packed and ::simd, chosen at run time
# from CPUID, cpu_isa.h) and the AVX2 / AVX-512 copies of the elementwise
# loops (hpu::device::detail::onAvx2 / onAvx512, vector_clones.h, chosen
# by cpuIsa() as well), no function of the given executable
# may use an AVX or AVX-512 instruction (a VEX/EVEX "v" mnemonic, a ymm, zmm
# or mask register): such a function would stop the program on an older CPU.
# Built with HPU_NATIVE=ON everything may, and the check is skipped.
# Usage: baseline_isa_check.sh <executable> <HPU_NATIVE>
set -euo pipefail
binary=$1
if [[ "${2:-OFF}" == "ON" ]]; then
  echo "HPU_NATIVE=ON: the build targets this CPU; nothing to check"
  exit 0
fi
offenders=$(objdump -d --no-show-raw-insn -C "$binary" | awk '
  /^[0-9a-f]+ <.*>:$/ { fn = substr($0, index($0, "<") + 1); sub(/>:$/, "", fn); next }
  /\t(v[a-z0-9]+|kmov[bwdq]|kortest[bwdq])[ \t]|%[yz]mm|%k[0-7]/ {
    # (A name objdump cannot demangle, a loop copy over nested lambdas, stays mangled.)
    if (fn !~ /(^| )hpu::device::kernels::(packed|simd)::/ && fn !~ /(^| )hpu::device::detail::onAvx(2|512)</ &&
        fn !~ /^_ZN3hpu6device6detail(6onAvx2|8onAvx512)I/ && !(fn in seen)) {
      seen[fn] = 1
      print fn
    }
  }')
if [[ -n "$offenders" ]]; then
  echo "functions outside the run-time-selected kernels use AVX/AVX-512 instructions:"
  echo "$offenders" | head -40
  exit 1
fi
echo "no AVX/AVX-512 instruction outside hpu::device::kernels::packed / ::simd and the onAvx2 / onAvx512 loop copies"

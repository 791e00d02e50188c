#pragma once
// Instruction-set selection for the kernels. The CPU is probed once (cpuid through
// __builtin_cpu_supports); GROVE_ISA=amx|avx512|avx2|scalar in the environment can force a
// lower ISA, for tests and comparisons. Every kernel entry point also takes an explicit Isa
// so a tester can run each supported ISA in one process.
#include <string_view>

namespace grove::kernels {

enum class Isa { scalar, avx2, avx512 };

// True when this CPU (and OS) can run kernels compiled for `isa`.
bool isa_supported(Isa isa);

// The ISA the kernels use by default: the best supported one, lowered by GROVE_ISA if set.
// Computed on first call and fixed for the life of the process.
Isa active_isa();

std::string_view isa_name(Isa isa);

// True when the bf16 GEMM kernels can run: the active ISA is AVX-512 (so GROVE_ISA=avx2
// turns them off too) and the CPU has AVX512-BF16 (vdpbf16ps, vcvtneps2bf16).
bool isa_supports_bf16();

// True when the AMX-BF16 tile GEMM can run: AVX-512 active, the CPU has AMX-TILE and
// AMX-BF16, the kernel granted this process the tile state (Linux arch_prctl, asked once
// here), and GROVE_ISA is unset or "amx" (any lower GROVE_ISA, avx512 included, turns AMX off).
bool isa_supports_amx();
// The same for the AMX-INT8 products (tdpbusd) of the 8-bit GEMM: AMX-INT8 in place of AMX-BF16.
bool isa_supports_amx_int8();

// True when the AVX-512 VNNI integer GEMM can run (vpdpwssd): AVX-512 active and the CPU has
// AVX512_VNNI.
bool isa_supports_avx512_vnni();

// Parses "avx512", "avx2" or "scalar"; returns false for anything else.
bool parse_isa(std::string_view text, Isa& out);

}  // namespace grove::kernels

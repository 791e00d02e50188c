# Per-file ISA flags for the kernels. The library itself is built for the baseline x86-64:
# only the files named *_avx512.cpp / *_avx2.cpp get wider instructions, and they are only
# called after the run-time check in isa.cpp.
file(GLOB GROVE_KERNELS_AVX512 CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/*_avx512.cpp)
file(GLOB GROVE_KERNELS_AVX512BF16 CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/*_avx512bf16.cpp)
file(GLOB GROVE_KERNELS_AVX512VNNI CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/*_avx512vnni.cpp)
file(GLOB GROVE_KERNELS_AMX CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/*_amx.cpp)
file(GLOB GROVE_KERNELS_AVX2 CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/*_avx2.cpp)
# -Wno-maybe-uninitialized: GCC 12 false positive inside its own avx512fintrin.h (the
# "undefined" source operand of the unmasked intrinsics).
set_source_files_properties(${GROVE_KERNELS_AVX512} PROPERTIES
  COMPILE_OPTIONS "-mavx512f;-mavx512dq;-mavx512bw;-mavx512vl;-mfma;-Wno-maybe-uninitialized")
set_source_files_properties(${GROVE_KERNELS_AVX512BF16} PROPERTIES
  COMPILE_OPTIONS "-mavx512f;-mavx512dq;-mavx512bw;-mavx512vl;-mavx512bf16;-mfma;-Wno-maybe-uninitialized")
set_source_files_properties(${GROVE_KERNELS_AVX512VNNI} PROPERTIES
  COMPILE_OPTIONS "-mavx512f;-mavx512bw;-mavx512vnni;-Wno-maybe-uninitialized")
set_source_files_properties(${GROVE_KERNELS_AMX} PROPERTIES
  COMPILE_OPTIONS "-mavx512f;-mavx512dq;-mavx512bw;-mavx512vl;-mavx512bf16;-mamx-tile;-mamx-bf16;-mamx-int8;-mfma;-Wno-maybe-uninitialized")
set_source_files_properties(${GROVE_KERNELS_AVX2} PROPERTIES
  COMPILE_OPTIONS "-mavx2;-mfma")
# The Winograd transforms run in vector and scalar form over the same blocks; without
# contraction into FMAs both forms round identically (winograd_f4x3_impl.h, winograd_f2x3_impl.h).
file(GLOB GROVE_KERNELS_WINOGRAD CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/winograd_f?x3_*.cpp)
set_property(SOURCE ${GROVE_KERNELS_WINOGRAD} APPEND PROPERTY COMPILE_OPTIONS "-ffp-contract=off")
# The attention rows add in one order on every ISA (attention_rows.h).
file(GLOB GROVE_KERNELS_ATTENTION_ROWS CONFIGURE_DEPENDS ${CMAKE_CURRENT_LIST_DIR}/attention_rows_*.cpp)
set_property(SOURCE ${GROVE_KERNELS_ATTENTION_ROWS} APPEND PROPERTY COMPILE_OPTIONS "-ffp-contract=off")
# The quantized epilogues do the float32 steps of the ops they replace, in their order: an
# FMA contraction would round once where the chain rounds twice (tests/unit/test_fuse_qdq.cpp).
set_property(SOURCE ${CMAKE_CURRENT_LIST_DIR}/qadd_avx512.cpp ${CMAKE_CURRENT_LIST_DIR}/requantize_avx512.cpp
             ${CMAKE_CURRENT_LIST_DIR}/qgemm_avx512vnni.cpp
             ${CMAKE_CURRENT_LIST_DIR}/qadd.cpp ${CMAKE_CURRENT_LIST_DIR}/requantize.cpp
             APPEND PROPERTY COMPILE_OPTIONS "-ffp-contract=off")
# F16C (float16 conversions) ships with every AVX2 CPU; it is a flag of its own.
set_property(SOURCE ${CMAKE_CURRENT_LIST_DIR}/half_avx2.cpp APPEND PROPERTY COMPILE_OPTIONS "-mf16c")
# Under AddressSanitizer clang spends minutes on each GEMM microkernel file: a check on every
# load of hundreds of unrolled tile instantiations, most of the sanitizer build's time
# (docs/fuzzing.md). They compile without ASan (UBSan still checks them): they read and write
# only the packed panels and output tiles that instrumented code allocates and hands them,
# and the kernel tests compare every tile shape and edge against the reference.
if(GROVE_SANITIZE MATCHES "address" AND CMAKE_CXX_COMPILER_ID STREQUAL "Clang")
  set_property(SOURCE ${CMAKE_CURRENT_LIST_DIR}/f32_gemm_avx512.cpp ${CMAKE_CURRENT_LIST_DIR}/f32_gemv_avx512.cpp ${CMAKE_CURRENT_LIST_DIR}/bf16_gemm_avx512bf16.cpp
               ${CMAKE_CURRENT_LIST_DIR}/qgemm_avx512vnni.cpp APPEND PROPERTY COMPILE_OPTIONS "-fno-sanitize=address")
  # The channel-blocked conv's AVX-512 instantiations (every kernel width, stride and output
  # block): clang took 167 s of CPU on this one file with ASan+UBSan, 10 s without, a tenth of
  # the sanitizer build. Its tester (tests/kernels/test_conv_nchwc.cpp) checks every edge, and
  # the AVX2 and scalar builds of the same code (conv_nchwc_impl.h) keep both sanitizers.
  set_property(SOURCE ${CMAKE_CURRENT_LIST_DIR}/conv_nchwc_avx512.cpp APPEND PROPERTY COMPILE_OPTIONS
               "-fno-sanitize=address,undefined")
  # UBSan's pointer-overflow check guards every pointer step of the unrolled tiles: it doubles
  # these files' compile time (f32_gemm_avx512.cpp 52 s against 27 s, 50 s of CPU over the
  # seven). A wrapped pointer would only matter on an access, which ASan checks where it is on
  # and the kernel tests' edges reach; UBSan's other checks stay.
  set_property(SOURCE ${CMAKE_CURRENT_LIST_DIR}/f32_gemm_avx512.cpp ${CMAKE_CURRENT_LIST_DIR}/f32_gemv_avx512.cpp
               ${CMAKE_CURRENT_LIST_DIR}/bf16_gemm_avx512bf16.cpp ${CMAKE_CURRENT_LIST_DIR}/qgemm_avx512vnni.cpp
               ${CMAKE_CURRENT_LIST_DIR}/dwconv_nhwc_avx512.cpp ${CMAKE_CURRENT_LIST_DIR}/dwconv_nhwc_avx2.cpp
               ${CMAKE_CURRENT_LIST_DIR}/conv_nchwc_avx2.cpp APPEND PROPERTY COMPILE_OPTIONS "-fno-sanitize=pointer-overflow")
endif()

// Fuzz target: model file bytes -> import -> bind -> plan -> run (tiles and reference).
#include "fuzz/fuzz_common.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  grove::fuzz::load_plan_run({reinterpret_cast<const char*>(data), size});
  return 0;
}

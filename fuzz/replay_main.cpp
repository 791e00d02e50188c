// A main for the fuzz targets without libFuzzer: runs LLVMFuzzerTestOneInput over every file
// given (or every file in the folders given). ctest replays the committed seeds and every
// regression input with it in the ordinary build, so a fixed crash stays fixed.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);
extern "C" __attribute__((weak)) void grove_fuzz_write_seed(const char* path);

namespace {

void replay(const std::filesystem::path& file) {
  std::ifstream f(file, std::ios::binary);
  std::vector<char> bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
}

}  // namespace

int main(int argc, char** argv) {
  if (argc == 3 && std::string(argv[1]) == "--write-seed" && grove_fuzz_write_seed) {
    grove_fuzz_write_seed(argv[2]);
    return 0;
  }
  int count = 0;
  for (int i = 1; i < argc; ++i) {
    std::filesystem::path p = argv[i];
    if (!std::filesystem::exists(p)) continue;  // a target with no regression inputs yet
    if (std::filesystem::is_directory(p)) {
      for (const auto& e : std::filesystem::recursive_directory_iterator(p))
        if (e.is_regular_file()) replay(e.path()), ++count;
    } else {
      replay(p), ++count;
    }
  }
  std::printf("replayed %d inputs\n", count);
  return 0;
}

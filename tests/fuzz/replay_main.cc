// Runs a fuzz target over saved inputs (files, or every file in the directories given)
// and fails on the first crash, like libFuzzer would: the corpora under tests/fuzz/corpus
// are regression tests in every build.
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

namespace {

int run_file(const std::filesystem::path& p) {
  std::ifstream in(p, std::ios::binary);
  if (!in) {
    std::fprintf(stderr, "cannot read %s\n", p.c_str());
    return 1;
  }
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  LLVMFuzzerTestOneInput(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  return 0;
}

}  // namespace

int main(int argc, char** argv) {
  size_t runs = 0;
  int failed = 0;
  for (int i = 1; i < argc; ++i) {
    std::filesystem::path arg(argv[i]);
    if (std::filesystem::is_directory(arg)) {
      for (const auto& e : std::filesystem::recursive_directory_iterator(arg)) {
        if (!e.is_regular_file()) continue;
        failed += run_file(e.path());
        ++runs;
      }
    } else {
      failed += run_file(arg);
      ++runs;
    }
  }
  std::printf("%zu inputs replayed\n", runs);
  return failed == 0 && runs > 0 ? 0 : 1;
}

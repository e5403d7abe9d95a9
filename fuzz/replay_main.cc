// A main() for fuzz targets built without libFuzzer: replays files (and every
// regular file under directories, recursively) through LLVMFuzzerTestOneInput,
// in sorted order, so the seed corpora run as ordinary regression tests.
//
//   sysfs_value_fuzz fuzz/corpus/sysfs_value [more files or directories...]
//
// An input that breaks an invariant traps inside the target, so reaching the
// end means every input passed. Exit status: 0 when all inputs ran, 2 on a bad
// argument or an unreadable file.

#include <algorithm>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <iostream>
#include <iterator>
#include <memory>
#include <string>
#include <system_error>
#include <vector>

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size);

#ifndef ROCEFAB_FUZZ_TARGET_NAME
#define ROCEFAB_FUZZ_TARGET_NAME ""
#endif

namespace {

namespace fs = std::filesystem;

// Adds `path` (a file, or every regular file below a directory) to `inputs`.
// False, with a message on stderr, when it does not exist or cannot be listed.
bool CollectInputs(const fs::path& path, std::vector<fs::path>* inputs) {
  std::error_code ec;
  const fs::file_status status = fs::status(path, ec);
  if (status.type() == fs::file_type::not_found) {
    std::cerr << "replay: " << path.string() << ": no such file or directory\n";
    return false;
  }
  if (ec) {
    std::cerr << "replay: " << path.string() << ": " << ec.message() << "\n";
    return false;
  }
  if (fs::is_regular_file(status)) {
    inputs->push_back(path);
    return true;
  }
  if (!fs::is_directory(status)) {
    std::cerr << "replay: " << path.string() << ": not a regular file or directory\n";
    return false;
  }
  std::vector<fs::path> found;
  fs::recursive_directory_iterator it(path, ec);
  for (; !ec && it != fs::recursive_directory_iterator(); it.increment(ec)) {
    std::error_code type_ec;
    if (it->is_regular_file(type_ec)) found.push_back(it->path());
  }
  if (ec) {
    std::cerr << "replay: " << path.string() << ": " << ec.message() << "\n";
    return false;
  }
  std::sort(found.begin(), found.end());
  inputs->insert(inputs->end(), found.begin(), found.end());
  return true;
}

// The whole file in a buffer of exactly its size, so a sanitizer sees any
// read past the end. Null on a read error.
std::unique_ptr<uint8_t[]> ReadInput(const fs::path& path, size_t* size) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return nullptr;
  const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  if (in.bad()) return nullptr;
  auto buffer = std::make_unique<uint8_t[]>(bytes.size());  // non-null even when empty
  std::copy(bytes.begin(), bytes.end(), buffer.get());
  *size = bytes.size();
  return buffer;
}

}  // namespace

int main(int argc, char** argv) {
  std::string name = ROCEFAB_FUZZ_TARGET_NAME;
  if (name.empty()) name = fs::path(argc > 0 ? argv[0] : "fuzz").filename().string();
  if (argc < 2) {
    std::cerr << "usage: " << (argc > 0 ? argv[0] : "replay")
              << " FILE_OR_DIRECTORY...\n"
                 "Replays every input through the "
              << name << " fuzz target.\n";
    return 2;
  }

  std::vector<fs::path> inputs;
  for (int i = 1; i < argc; ++i) {
    if (!CollectInputs(argv[i], &inputs)) return 2;
  }

  size_t replayed = 0;
  for (const fs::path& path : inputs) {
    size_t size = 0;
    std::unique_ptr<uint8_t[]> data = ReadInput(path, &size);
    if (data == nullptr) {
      std::cerr << "replay: " << path.string() << ": cannot read\n";
      return 2;
    }
    // Named before the call, so a trap points at the input that caused it.
    std::fprintf(stderr, "replaying %s (%zu bytes)\n", path.string().c_str(), size);
    LLVMFuzzerTestOneInput(data.get(), size);
    ++replayed;
  }

  std::cout << name << ": " << replayed << " inputs replayed\n"
            << replayed << " passed, 0 failed\n";
  return 0;
}

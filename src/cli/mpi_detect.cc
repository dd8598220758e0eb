#include "cli/mpi_detect.h"

#include <elf.h>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cstring>

#include "util/unique_fd.h"

namespace corral::cli {

namespace {

constexpr std::size_t kMaxHeaders = 128;        // program headers read
constexpr std::size_t kMaxDynamic = 64 << 10;   // bytes of the dynamic section read
constexpr std::size_t kMaxStrings = 1 << 20;    // bytes of its string table read

bool read_at(int fd, void* buf, std::size_t size, off_t offset) {
  return ::pread(fd, buf, size, offset) == static_cast<ssize_t>(size);
}

std::string find_in_path(const std::string& program, const JobContext& ctx) {
  if (program.find('/') != std::string::npos)
    return program.front() == '/' ? program : ctx.cwd + "/" + program;
  auto it = ctx.env.find("PATH");
  const std::string path = it == ctx.env.end() ? "/usr/bin:/bin" : it->second;
  std::size_t start = 0;
  while (start <= path.size()) {
    std::size_t end = path.find(':', start);
    if (end == std::string::npos) end = path.size();
    std::string dir = path.substr(start, end - start);
    std::string candidate = (dir.empty() ? ctx.cwd : dir) + "/" + program;
    if (::access(candidate.c_str(), X_OK) == 0) return candidate;
    start = end + 1;
  }
  return "";
}

}  // namespace

std::vector<std::string> elf_needed_libraries(const std::string& path) {
  UniqueFd fd(::open(path.c_str(), O_RDONLY | O_CLOEXEC | O_NOCTTY | O_NONBLOCK));
  struct stat st {};
  if (!fd.valid() || ::fstat(fd.get(), &st) != 0 || !S_ISREG(st.st_mode)) return {};
  Elf64_Ehdr eh;
  if (!read_at(fd.get(), &eh, sizeof eh, 0) || std::memcmp(eh.e_ident, ELFMAG, SELFMAG) != 0 ||
      eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB || eh.e_phentsize != sizeof(Elf64_Phdr) ||
      eh.e_phnum == 0 || eh.e_phnum > kMaxHeaders)
    return {};
  std::vector<Elf64_Phdr> ph(eh.e_phnum);
  if (!read_at(fd.get(), ph.data(), ph.size() * sizeof(Elf64_Phdr), static_cast<off_t>(eh.e_phoff))) return {};
  const Elf64_Phdr* dyn = nullptr;
  for (const auto& p : ph)
    if (p.p_type == PT_DYNAMIC) dyn = &p;
  if (dyn == nullptr || dyn->p_filesz == 0 || dyn->p_filesz > kMaxDynamic) return {};
  std::vector<Elf64_Dyn> entries(dyn->p_filesz / sizeof(Elf64_Dyn));
  if (!read_at(fd.get(), entries.data(), entries.size() * sizeof(Elf64_Dyn), static_cast<off_t>(dyn->p_offset)))
    return {};
  uint64_t strtab = 0, strsz = 0;
  std::vector<uint64_t> needed;
  for (const auto& d : entries) {
    if (d.d_tag == DT_NULL) break;
    if (d.d_tag == DT_STRTAB) strtab = d.d_un.d_ptr;
    if (d.d_tag == DT_STRSZ) strsz = d.d_un.d_val;
    if (d.d_tag == DT_NEEDED) needed.push_back(d.d_un.d_val);
  }
  if (needed.empty() || strsz == 0 || strsz > kMaxStrings) return {};
  // The string table is named by its address: find the loaded segment that holds it.
  uint64_t offset = 0;
  bool mapped = false;
  for (const auto& p : ph)
    if (p.p_type == PT_LOAD && strtab >= p.p_vaddr && strtab + strsz <= p.p_vaddr + p.p_filesz) {
      offset = p.p_offset + (strtab - p.p_vaddr);
      mapped = true;
    }
  if (!mapped) return {};
  std::string strings(strsz, '\0');
  if (!read_at(fd.get(), strings.data(), strings.size(), static_cast<off_t>(offset))) return {};
  std::vector<std::string> out;
  for (uint64_t at : needed)
    if (at < strings.size()) out.emplace_back(strings.c_str() + at);
  return out;
}

std::string mpi_for_program(const std::string& program, const JobContext& ctx) {
  if (program.empty()) return "";
  const std::string path = find_in_path(program, ctx);
  if (path.empty()) return "";
  for (const auto& lib : elf_needed_libraries(path))
    if (lib.rfind("libpmix.so", 0) == 0 || lib == "libmpi.so.40") return "pmix";
  return "";
}

}  // namespace corral::cli

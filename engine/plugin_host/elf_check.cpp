#include "plugin_host/elf_check.hpp"

#include <elf.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <vector>

namespace ratchet::plugin_host {
namespace {

#if defined(__x86_64__)
constexpr std::uint16_t kMachine = EM_X86_64;
#elif defined(__aarch64__)
constexpr std::uint16_t kMachine = EM_AARCH64;
#else
#error "add this machine's ELF e_machine value"
#endif

ElfCheck refuse(std::string reason) { return {false, false, std::move(reason)}; }
ElfCheck incomplete(std::uintmax_t size, std::uint64_t needed, const char* what) {
  return {false, true,
          "the file is incomplete (" + std::to_string(size) + " bytes, but its " + what + " reach byte " +
              std::to_string(needed) + "); if it is still being copied it is retried when it changes"};
}

}  // namespace

ElfCheck check_elf_shared_object(const std::filesystem::path& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) return refuse("cannot be opened for reading");
  std::vector<char> bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
  const std::uint64_t size = bytes.size();

  if (size < 4 || std::memcmp(bytes.data(), ELFMAG, SELFMAG) != 0)
    return refuse("not a shared library: it does not start with an ELF header (a text file or another format?)");
  if (size < sizeof(Elf64_Ehdr)) return incomplete(size, sizeof(Elf64_Ehdr), "ELF header would");
  Elf64_Ehdr eh;
  std::memcpy(&eh, bytes.data(), sizeof(eh));
  if (eh.e_ident[EI_CLASS] != ELFCLASS64 || eh.e_ident[EI_DATA] != ELFDATA2LSB)
    return refuse("not a shared library for this machine: it is not a 64-bit little-endian ELF file");
  if (eh.e_type != ET_DYN)
    return refuse("not a shared library: ELF type " + std::to_string(eh.e_type) +
                  " is not ET_DYN (an executable or object file?)");
  if (eh.e_machine != kMachine)
    return refuse("built for another machine (ELF machine " + std::to_string(eh.e_machine) + ")");
  if (eh.e_phentsize != sizeof(Elf64_Phdr) || eh.e_phnum == 0)
    return refuse("not a loadable shared library: it has no program headers");

  const std::uint64_t ph_end = eh.e_phoff + std::uint64_t{eh.e_phnum} * sizeof(Elf64_Phdr);
  if (ph_end > size) return incomplete(size, ph_end, "program headers");
  for (int i = 0; i < eh.e_phnum; ++i) {
    Elf64_Phdr ph;
    std::memcpy(&ph, bytes.data() + eh.e_phoff + i * sizeof(Elf64_Phdr), sizeof(ph));
    if (ph.p_type != PT_LOAD && ph.p_type != PT_DYNAMIC) continue;
    if (ph.p_offset + ph.p_filesz > size) return incomplete(size, ph.p_offset + ph.p_filesz, "segments");
  }
  if (eh.e_shoff != 0) {
    const std::uint64_t sh_end = eh.e_shoff + std::uint64_t{eh.e_shnum} * eh.e_shentsize;
    if (sh_end > size) return incomplete(size, sh_end, "section headers");
  }
  return {true, false, {}};
}

}  // namespace ratchet::plugin_host

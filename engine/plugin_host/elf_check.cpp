#include "plugin_host/elf_check.hpp"

#include <elf.h>

#include <cstdint>
#include <cstring>
#include <fstream>
#include <string>
#include <system_error>

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
  std::error_code ec;
  const std::uint64_t size = std::filesystem::file_size(file, ec);
  if (!in || ec) return refuse("cannot be opened for reading");
  // Reads `n` bytes at `offset` (both already checked against `size`).
  auto read_at = [&](std::uint64_t offset, void* out, std::size_t n) {
    in.seekg(static_cast<std::streamoff>(offset));
    in.read(static_cast<char*>(out), static_cast<std::streamsize>(n));
    return static_cast<bool>(in);
  };

  char magic[SELFMAG] = {};
  if (size < SELFMAG || !read_at(0, magic, SELFMAG) || std::memcmp(magic, ELFMAG, SELFMAG) != 0)
    return refuse(
        "not a shared library: it does not start with an ELF header (a text file or another format?)");
  if (size < sizeof(Elf64_Ehdr)) return incomplete(size, sizeof(Elf64_Ehdr), "ELF header would");
  Elf64_Ehdr eh;
  if (!read_at(0, &eh, sizeof(eh))) return refuse("cannot be read");
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
    if (!read_at(eh.e_phoff + i * sizeof(Elf64_Phdr), &ph, sizeof(ph))) return refuse("cannot be read");
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

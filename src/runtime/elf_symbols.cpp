// A module's function symbols (.symtab), read once per file and searched by address (see
// elf_symbols.hpp).
#include "runtime/elf_symbols.hpp"

#if defined(__APPLE__)
// macOS modules are Mach-O, not ELF: a task dump names there only what dladdr names.
namespace galay::detail {
std::string elf_function_name(const char*, const void*, const void*) {
    return {};
}
} // namespace galay::detail
#else

#include <elf.h>
#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <map>
#include <mutex>
#include <vector>

namespace galay::detail {

namespace {

struct Symbol {
    std::uint64_t start, size;
    std::string name;
};

struct Module {
    bool absolute = false;         // ET_EXEC: addresses are the symbols' own values
    std::vector<Symbol> functions; // by start
};

Module load(const char* path) {
    Module m;
    const int fd = ::open(path, O_RDONLY | O_CLOEXEC);
    if (fd < 0) return m;
    struct stat st {};
    void* map = MAP_FAILED;
    if (::fstat(fd, &st) == 0 && st.st_size > static_cast<off_t>(sizeof(Elf64_Ehdr)))
        map = ::mmap(nullptr, static_cast<std::size_t>(st.st_size), PROT_READ, MAP_PRIVATE, fd, 0);
    ::close(fd);
    if (map == MAP_FAILED) return m;
    const auto* bytes = static_cast<const unsigned char*>(map);
    const auto size = static_cast<std::size_t>(st.st_size);
    const auto* eh = reinterpret_cast<const Elf64_Ehdr*>(bytes);
    const bool elf64 = std::memcmp(eh->e_ident, ELFMAG, SELFMAG) == 0 &&
                       eh->e_ident[EI_CLASS] == ELFCLASS64 && eh->e_shentsize == sizeof(Elf64_Shdr);
    if (elf64 && eh->e_shoff + std::uint64_t{eh->e_shnum} * sizeof(Elf64_Shdr) <= size) {
        m.absolute = eh->e_type == ET_EXEC;
        const auto* sh = reinterpret_cast<const Elf64_Shdr*>(bytes + eh->e_shoff);
        for (unsigned i = 0; i < eh->e_shnum; ++i) {
            if (sh[i].sh_type != SHT_SYMTAB || sh[i].sh_link >= eh->e_shnum) continue;
            const Elf64_Shdr& strs = sh[sh[i].sh_link];
            if (sh[i].sh_offset + sh[i].sh_size > size || strs.sh_offset + strs.sh_size > size)
                continue;
            const auto* syms = reinterpret_cast<const Elf64_Sym*>(bytes + sh[i].sh_offset);
            const std::size_t n = sh[i].sh_size / sizeof(Elf64_Sym);
            const char* names = reinterpret_cast<const char*>(bytes + strs.sh_offset);
            for (std::size_t k = 0; k < n; ++k) {
                if (ELF64_ST_TYPE(syms[k].st_info) != STT_FUNC || syms[k].st_value == 0 ||
                    syms[k].st_name >= strs.sh_size)
                    continue;
                const char* name = names + syms[k].st_name;
                m.functions.push_back(
                    Symbol{syms[k].st_value, syms[k].st_size,
                           std::string(name, strnlen(name, strs.sh_size - syms[k].st_name))});
            }
        }
    }
    ::munmap(map, size);
    std::sort(m.functions.begin(), m.functions.end(),
              [](const Symbol& a, const Symbol& b) { return a.start < b.start; });
    return m;
}

} // namespace

std::string elf_function_name(const char* module, const void* base, const void* address) {
    static std::mutex mu;
    static std::map<std::string, Module> modules;
    if (module == nullptr) return {};
    std::lock_guard lk(mu);
    auto it = modules.find(module);
    if (it == modules.end()) it = modules.emplace(module, load(module)).first;
    const Module& m = it->second;
    const std::uint64_t at = reinterpret_cast<std::uintptr_t>(address) -
                             (m.absolute ? 0 : reinterpret_cast<std::uintptr_t>(base));
    auto f = std::upper_bound(m.functions.begin(), m.functions.end(), at,
                              [](std::uint64_t a, const Symbol& s) { return a < s.start; });
    if (f == m.functions.begin()) return {};
    --f;
    if (at >= f->start + std::max<std::uint64_t>(f->size, 1)) return {};
    return f->name;
}

} // namespace galay::detail

#endif // !__APPLE__

// The name of a function by address from its module's ELF symbol table (.symtab): dladdr sees
// only the dynamic symbols, and a coroutine's resume function is a local symbol (GCC makes the
// "actor" of every coroutine static). Used by task dumps (task_format.cpp), never on a hot path.
#pragma once

#include <string>

namespace galay::detail {

/// The raw (mangled) name of the function containing `address`, from the symbol table of the
/// file `module` loaded at `base` (dladdr's dli_fname, dli_fbase); empty when the file has no
/// .symtab (stripped) or no function there. Thread-safe; each file is read once.
std::string elf_function_name(const char* module, const void* base, const void* address);

} // namespace galay::detail

#pragma once
// GROVE_EMBED_FILE(symbol, "file"): the bytes of a file under GROVE_EMBED_DIR (an absolute
// path the layer's CMake defines), copied into .rodata by the assembler's .incbin, as
// symbol_begin .. symbol_end (a 0 byte follows, not counted). Top-level asm needs no assembler
// language in CMake; the CMake file lists the embedded files in OBJECT_DEPENDS so a changed
// file rebuilds its object.
#include <cstddef>

#define GROVE_EMBED_FILE(symbol, file)                                  \
  asm(".section .rodata\n"                                              \
      ".balign 64\n"                                                    \
      ".global " #symbol "_begin\n"                                     \
      ".hidden " #symbol "_begin\n"                                     \
      ".global " #symbol "_end\n"                                       \
      ".hidden " #symbol "_end\n" #symbol "_begin:\n"                   \
      ".incbin \"" GROVE_EMBED_DIR "/" file "\"\n" #symbol "_end:\n"    \
      ".byte 0\n"                                                       \
      ".previous\n");                                                   \
  extern "C" const std::byte symbol##_begin[];                          \
  extern "C" const std::byte symbol##_end[];

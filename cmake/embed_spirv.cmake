# cmake -DSPV=in.spv -DOUT=out.cpp -DSYMBOL=name -P embed_spirv.cmake
# Writes a .cpp defining g4::gpu::spirv::SYMBOL() over the SPIR-V words of SPV, so the shaders
# travel inside the binary (no file is looked up at run time). SPIR-V is a stream of 32-bit
# little-endian words; glslc writes it in the host's order, which is little-endian on every
# target g4 builds for.
file(READ "${SPV}" hex HEX)
string(LENGTH "${hex}" n)
math(EXPR rem "${n} % 8")
if(n EQUAL 0 OR NOT rem EQUAL 0)
  message(FATAL_ERROR "${SPV}: not a whole number of 32-bit SPIR-V words")
endif()
string(REGEX REPLACE "(..)(..)(..)(..)" "0x\\4\\3\\2\\1u," words "${hex}")
string(REGEX REPLACE "((0x........u,){8})" "\\1\n    " words "${words}")
file(WRITE "${OUT}.tmp" "// Generated from ${SPV} by cmake/embed_spirv.cmake; do not edit.
#include \"gpu/vulkan/spirv_code.h\"

namespace g4::gpu::spirv {
namespace {
const uint32_t k${SYMBOL}_words[] = {
    ${words}
};
}  // namespace
SpirvCode ${SYMBOL}() { return {k${SYMBOL}_words, sizeof k${SYMBOL}_words / sizeof(uint32_t)}; }
}  // namespace g4::gpu::spirv
")
file(COPY_FILE "${OUT}.tmp" "${OUT}" ONLY_IF_DIFFERENT)
file(REMOVE "${OUT}.tmp")

// The C heap's handling of large blocks, tuned for the forward pass.
//
// Why: a prefill step allocates activation buffers of tens of MiB per product ([T, out] f32)
// and frees them right after. glibc serves blocks above its mmap threshold with a fresh mmap
// each time, so every such buffer costs page faults and kernel page zeroing (a large share of a
// prefill's time). Raising the thresholds keeps freed blocks in the heap for the next step.
#pragma once
#include <cstdint>

namespace g4 {

// Serve blocks up to `max_block_bytes` from the heap and keep up to `keep_free_bytes` of freed
// memory at its top for reuse instead of trimming it back to the OS. glibc accepts at most 32 MiB
// blocks on 64-bit (half its heap size), enough for a 512-token step's widest buffer (512 x 12288
// f32 = 24 MiB). A step frees several such buffers at once; with the trim threshold at 32 MiB as
// well the heap would shrink after each product and grow again in the next, the kernel zeroing
// the new pages while the pool waits. The heap's top stays at the largest step's working set.
// Idempotent; a no-op where the C library is not glibc. Returns whether the setting took effect.
bool keep_large_blocks_in_heap(uint64_t max_block_bytes = uint64_t(32) << 20, uint64_t keep_free_bytes = uint64_t(1) << 30);

}  // namespace g4

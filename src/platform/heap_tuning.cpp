#include "platform/heap_tuning.h"

#include <climits>

#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace g4 {

bool keep_large_blocks_in_heap(uint64_t max_block_bytes, uint64_t keep_free_bytes) {
#if defined(__GLIBC__)
  // glibc refuses an mmap threshold above half its heap size (32 MiB on 64-bit); an int is the interface.
  if (max_block_bytes > uint64_t(INT_MAX) || keep_free_bytes > uint64_t(INT_MAX)) return false;
  const bool mmap_ok = mallopt(M_MMAP_THRESHOLD, int(max_block_bytes)) == 1;
  const bool trim_ok = mallopt(M_TRIM_THRESHOLD, int(keep_free_bytes)) == 1;
  return mmap_ok && trim_ok;
#else
  (void)max_block_bytes;
  (void)keep_free_bytes;
  return false;
#endif
}

}  // namespace g4

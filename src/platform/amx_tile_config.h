// The 64-byte operand of LDTILECFG (palette 1): per tile register tmm0..tmm7, how many rows it
// holds and how many bytes each row has. A tile left at 0 rows and 0 bytes is unconfigured (an
// instruction naming it faults). Shared by the AMX self-tests, the AMX peak loop and the AMX
// kernels, which must all describe their tiles the same way.
#pragma once
#include <cstdint>

namespace g4 {

struct alignas(64) TileConfig {
  uint8_t palette_id = 1;
  uint8_t start_row = 0;
  uint8_t reserved[14] = {};
  uint16_t bytes_per_row[16] = {};  // entries 0..7: tmm0..tmm7
  uint8_t rows[16] = {};            // entries 0..7: tmm0..tmm7

  void set(int tile, int tile_rows, int row_bytes) {
    rows[tile] = uint8_t(tile_rows);
    bytes_per_row[tile] = uint16_t(tile_rows ? row_bytes : 0);
  }
};
static_assert(sizeof(TileConfig) == 64, "LDTILECFG reads 64 bytes");

inline constexpr int kTileRows = 16;      // the most rows a tile register holds
inline constexpr int kTileRowBytes = 64;  // the most bytes in one of its rows

}  // namespace g4

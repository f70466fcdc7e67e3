// Shared by attention_scores.comp and attention_values.comp: which keys row t sees. rows[t] is
// the row's {slot, absolute position}; a sliding layer sees keys at q - k < window, a full layer
// (window 0) every earlier key of its own slot; key j of a row is at position first + j, stored
// at (first + j) % capacity of the slot's [capacity, kv_heads, hd] part of the buffer.
// KV_T (float, or float16_t with KV_F16) is defined by the including shader.
layout(push_constant) uniform P {
  uint T; uint heads; uint kv_heads; uint hd; uint window; uint capacity; uint S;
} p;
layout(std430, binding = 3) readonly buffer Rows { uvec2 rows[]; };
uint first_key(uint pos) { return (p.window == 0 || pos + 1 < p.window) ? 0 : pos + 1 - p.window; }
uint kv_index(uint slot, uint key_pos, uint h, uint d) {  // GQA: query head h reads kv head h / (heads / kv_heads)
  return ((slot * p.capacity + key_pos % p.capacity) * p.kv_heads + h / (p.heads / p.kv_heads)) * p.hd + d;
}

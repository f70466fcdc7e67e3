// Shared by attention_scores.comp and attention_values.comp: which keys row t sees. Positions are
// absolute (pos0 + t); a sliding layer sees keys at q - k < window, a full layer (window 0) every
// earlier key; key j of a row is at position first + j, in slot (first + j) % capacity.
layout(push_constant) uniform P {
  uint T; uint heads; uint kv_heads; uint hd; uint pos0; uint window; uint capacity; uint S;
} p;
uint first_key(uint pos) { return (p.window == 0 || pos + 1 < p.window) ? 0 : pos + 1 - p.window; }
uint kv_index(uint key_pos, uint h, uint d) {  // GQA: query head h reads kv head h / (heads / kv_heads)
  return ((key_pos % p.capacity) * p.kv_heads + h / (p.heads / p.kv_heads)) * p.hd + d;
}

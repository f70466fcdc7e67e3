#include "model/gguf.h"

#include <algorithm>
#include <cstring>
#include <fstream>
#include <limits>
#include <set>

#include "platform/error.h"

namespace g4 {

namespace {

constexpr uint32_t kMagic = 0x46554747u;  // "GGUF" little-endian
constexpr int kMaxArrayDepth = 8;
constexpr uint64_t kMaxDims = 4;           // GGML_MAX_DIMS
constexpr uint64_t kMaxDim = 1ull << 40;

bool valid_type(uint32_t t) { return t <= uint32_t(GgufType::F64); }

// Bounds-checked little-endian reader over the mapped file.
struct Cursor {
  const std::byte* base;
  uint64_t size;
  uint64_t pos;
  std::string file;

  [[noreturn]] void fail(uint64_t at, const std::string& what) const {
    throw Error(file + ": byte " + std::to_string(at) + ": " + what);
  }
  uint64_t left() const { return size - pos; }
  void need(uint64_t n, const std::string& what) const {
    if (n > left())
      fail(pos, what + " needs " + std::to_string(n) + " bytes but only " + std::to_string(left()) +
                    " remain (file is " + std::to_string(size) + " bytes): truncated or corrupt");
  }
  template <typename T>
  T read(const std::string& what) {
    need(sizeof(T), what);
    T v;
    std::memcpy(&v, base + pos, sizeof(T));  // GGUF is little-endian; so are g4's targets
    pos += sizeof(T);
    return v;
  }
  std::string_view string(const std::string& what) {
    const uint64_t at = pos;
    const uint64_t n = read<uint64_t>(what + " length");
    if (n > left())
      fail(at, what + ": string length " + std::to_string(n) + " runs past the end of the file (" +
                   std::to_string(left()) + " bytes remain)");
    std::string_view s(reinterpret_cast<const char*>(base + pos), size_t(n));
    pos += n;
    return s;
  }
};

// A float metadata value as an integer: truncated toward zero, saturated at the int64 range,
// NaN -> 0 (a plain cast of an out-of-range float is undefined behaviour; found by fuzz/gguf_fuzz).
int64_t saturating_int(double v) {
  if (!(v == v)) return 0;
  if (v >= 9223372036854775808.0) return INT64_MAX;
  if (v <= -9223372036854775808.0) return INT64_MIN;
  return int64_t(v);
}

int64_t scalar_int(GgufType t, const std::byte* p) {
  switch (t) {
    case GgufType::U8: case GgufType::BOOL: { uint8_t v; std::memcpy(&v, p, 1); return v; }
    case GgufType::I8: { int8_t v; std::memcpy(&v, p, 1); return v; }
    case GgufType::U16: { uint16_t v; std::memcpy(&v, p, 2); return v; }
    case GgufType::I16: { int16_t v; std::memcpy(&v, p, 2); return v; }
    case GgufType::U32: { uint32_t v; std::memcpy(&v, p, 4); return v; }
    case GgufType::I32: { int32_t v; std::memcpy(&v, p, 4); return v; }
    case GgufType::U64: { uint64_t v; std::memcpy(&v, p, 8); return v > uint64_t(INT64_MAX) ? INT64_MAX : int64_t(v); }
    case GgufType::I64: { int64_t v; std::memcpy(&v, p, 8); return v; }
    case GgufType::F32: { float v; std::memcpy(&v, p, 4); return saturating_int(v); }
    case GgufType::F64: { double v; std::memcpy(&v, p, 8); return saturating_int(v); }
    default: return 0;
  }
}

double scalar_float(GgufType t, const std::byte* p) {
  switch (t) {
    case GgufType::F32: { float v; std::memcpy(&v, p, 4); return v; }
    case GgufType::F64: { double v; std::memcpy(&v, p, 8); return v; }
    case GgufType::U64: { uint64_t v; std::memcpy(&v, p, 8); return double(v); }
    default: return double(scalar_int(t, p));
  }
}

GgufValue read_value(Cursor& c, GgufType type, const std::string& what, int depth) {
  GgufValue v;
  v.type = type;
  v.offset = c.pos;
  if (type == GgufType::STRING) {
    v.str = c.string(what);
    return v;
  }
  if (type == GgufType::ARRAY) {
    if (depth >= kMaxArrayDepth) c.fail(c.pos, what + ": arrays nested more than " + std::to_string(kMaxArrayDepth) + " deep");
    const uint64_t at = c.pos;
    const uint32_t et = c.read<uint32_t>(what + " array element type");
    if (!valid_type(et)) c.fail(at, what + ": unknown array element type " + std::to_string(et));
    v.elem_type = GgufType(et);
    v.count = c.read<uint64_t>(what + " array length");
    // The smallest an element can be: refuse counts the rest of the file cannot hold before
    // allocating anything for them.
    const uint64_t min_elem = v.elem_type == GgufType::STRING ? 8 : v.elem_type == GgufType::ARRAY ? 12 : gguf_scalar_size(v.elem_type);
    if (v.count > c.left() / min_elem)
      c.fail(at, what + ": array of " + std::to_string(v.count) + " " + gguf_type_name(v.elem_type) +
                     " elements cannot fit in the " + std::to_string(c.left()) + " bytes left in the file");
    if (v.elem_type == GgufType::STRING) {
      v.strings.reserve(size_t(v.count));
      for (uint64_t k = 0; k < v.count; ++k) v.strings.push_back(c.string(what + "[" + std::to_string(k) + "]"));
    } else if (v.elem_type == GgufType::ARRAY) {
      v.arrays.reserve(size_t(v.count));
      for (uint64_t k = 0; k < v.count; ++k)
        v.arrays.push_back(read_value(c, GgufType::ARRAY, what + "[" + std::to_string(k) + "]", depth + 1));
    } else {
      v.elems = c.base + c.pos;
      c.pos += v.count * min_elem;
    }
    return v;
  }
  const size_t n = gguf_scalar_size(type);
  c.need(n, what);
  v.i = scalar_int(type, c.base + c.pos);
  v.f = scalar_float(type, c.base + c.pos);
  if (type == GgufType::U64) std::memcpy(&v.u, c.base + c.pos, 8);
  else v.u = uint64_t(v.i);
  c.pos += n;
  return v;
}

// The steps of GgufFile::open, in file order.

// Magic, version and the tensor and metadata counts (checked against what the file can hold).
struct Preamble {
  uint32_t version;
  uint64_t n_tensors, n_kv;
};
Preamble read_preamble(Cursor& c) {
  if (c.size < 4) c.fail(0, "not a GGUF file: only " + std::to_string(c.size) + " bytes");
  const uint32_t magic = c.read<uint32_t>("magic");
  if (magic != kMagic) {
    char m[5] = {0};
    std::memcpy(m, c.base, 4);
    for (char& ch : m)
      if (ch && (ch < 32 || ch > 126)) ch = '?';
    c.fail(0, std::string("not a GGUF file: magic '") + m + "' (expected 'GGUF')");
  }
  Preamble p;
  p.version = c.read<uint32_t>("version");
  if (p.version != 3)
    c.fail(4, "GGUF version " + std::to_string(p.version) + " is not supported (g4 reads version 3)" +
                  (p.version > 0xFFFF ? ": a big-endian file?" : ""));
  p.n_tensors = c.read<uint64_t>("tensor count");
  p.n_kv = c.read<uint64_t>("metadata count");
  // Each metadata entry takes at least 8 (key length) + 4 (type) + 1 bytes; each tensor info
  // at least 8 + 4 + 8 + 4 + 8 = 32 bytes (name length, n_dims, one ne, type, offset).
  if (p.n_kv > c.left() / 13) c.fail(16, "metadata count " + std::to_string(p.n_kv) + " is absurd for a " + std::to_string(c.size) + "-byte file");
  if (p.n_tensors > c.left() / 32) c.fail(8, "tensor count " + std::to_string(p.n_tensors) + " is absurd for a " + std::to_string(c.size) + "-byte file");
  return p;
}

std::map<std::string, GgufValue> read_metadata(Cursor& c, uint64_t n_kv) {
  std::map<std::string, GgufValue> kv;
  for (uint64_t k = 0; k < n_kv; ++k) {
    const uint64_t at = c.pos;
    const std::string key(c.string("metadata key #" + std::to_string(k)));
    const uint64_t tat = c.pos;
    const uint32_t t = c.read<uint32_t>("type of metadata '" + key + "'");
    if (!valid_type(t)) c.fail(tat, "metadata '" + key + "': unknown value type " + std::to_string(t));
    GgufValue v = read_value(c, GgufType(t), "metadata '" + key + "'", 0);
    if (!kv.emplace(key, std::move(v)).second) c.fail(at, "metadata key '" + key + "' appears twice");
  }
  return kv;
}

// general.alignment, 32 when absent.
uint64_t read_alignment(const Cursor& c, const std::map<std::string, GgufValue>& kv) {
  auto it = kv.find("general.alignment");
  if (it == kv.end()) return 32;
  const GgufValue* a = &it->second;
  if (!a->is_int() || a->type == GgufType::BOOL) c.fail(a->offset, "general.alignment must be an integer");
  if (a->i < 1 || a->i > (1 << 20) || (a->i & (a->i - 1)))
    c.fail(a->offset, "general.alignment = " + std::to_string(a->i) + ": must be a power of two up to 1 MiB");
  return uint64_t(a->i);
}

std::string tensor_where(const GgufTensorInfo& ti) {
  return "tensor '" + ti.name + "' (info at byte " + std::to_string(ti.info_offset) + ")";
}

// ggml's integer tensor types (index tables, not weights).
constexpr uint32_t kGgmlI32 = 26, kGgmlI64 = 27;

// Tensor info #k: name, dimensions, type and data offset.
GgufTensorInfo read_tensor_info(Cursor& c, uint64_t k) {
  GgufTensorInfo ti;
  ti.info_offset = c.pos;
  ti.name = std::string(c.string("tensor info #" + std::to_string(k) + " name"));
  const std::string where = tensor_where(ti);
  const uint32_t nd = c.read<uint32_t>(where + " n_dims");
  if (nd < 1 || nd > kMaxDims) c.fail(ti.info_offset, where + ": n_dims " + std::to_string(nd) + " (expected 1.." + std::to_string(kMaxDims) + ")");
  uint64_t numel = 1;
  for (uint32_t d = 0; d < nd; ++d) {
    const uint64_t ne = c.read<uint64_t>(where + " ne[" + std::to_string(d) + "]");
    if (ne < 1 || ne > kMaxDim) c.fail(ti.info_offset, where + ": ne[" + std::to_string(d) + "] = " + std::to_string(ne) + " is absurd");
    if (numel > (1ull << 62) / ne) c.fail(ti.info_offset, where + ": element count overflows");
    numel *= ne;
    ti.ne.push_back(int64_t(ne));
  }
  const uint64_t tat = c.pos;
  ti.ggml_type = c.read<uint32_t>(where + " type");
  if (ti.ggml_type == kGgmlI32 || ti.ggml_type == kGgmlI64) {
    ti.int_bytes = ti.ggml_type == kGgmlI32 ? 4 : 8;
    ti.offset = c.read<uint64_t>(where + " data offset");
    return ti;
  }
  auto dt = dtype_from_ggml(ti.ggml_type);
  if (!dt)
    c.fail(tat, where + ": ggml type " + std::to_string(ti.ggml_type) +
                    " is not supported (g4 reads F32, F16, BF16, Q8_0, Q4_0, Q4_1, Q4_K, Q5_K, Q6_K, and I32/I64 index tables)");
  ti.dtype = *dt;
  if (ti.ne[0] % dtype_block_size(ti.dtype))
    c.fail(tat, where + ": row length ne[0] = " + std::to_string(ti.ne[0]) + " is not a multiple of the " +
                    std::string(dtype_name(ti.dtype)) + " block size " + std::to_string(dtype_block_size(ti.dtype)));
  ti.offset = c.read<uint64_t>(where + " data offset");
  return ti;
}

std::vector<GgufTensorInfo> read_tensor_infos(Cursor& c, uint64_t n_tensors) {
  std::vector<GgufTensorInfo> infos;
  std::set<std::string> names;
  for (uint64_t k = 0; k < n_tensors; ++k) {
    GgufTensorInfo ti = read_tensor_info(c, k);
    if (!names.insert(ti.name).second) c.fail(ti.info_offset, "tensor name '" + ti.name + "' appears twice");
    infos.push_back(std::move(ti));
  }
  return infos;
}

// The view of tensor ti, whose data must lie aligned inside the data section (data_len bytes
// from file offset data_offset).
TensorView tensor_view(const Cursor& c, const GgufTensorInfo& ti, uint64_t al, uint64_t data_offset) {
  const uint64_t data_len = c.size - data_offset;
  const std::string where = tensor_where(ti);
  uint64_t rows = 1;
  for (size_t d = 1; d < ti.ne.size(); ++d) rows *= uint64_t(ti.ne[d]);
  const uint64_t rb = ti.int_bytes ? uint64_t(ti.ne[0]) * uint64_t(ti.int_bytes) : row_bytes(ti.dtype, ti.ne[0]);
  if (rows && rb > (1ull << 62) / rows) c.fail(ti.info_offset, where + ": byte size overflows");
  const uint64_t nbytes = rows * rb;
  if (ti.offset % al)
    c.fail(ti.info_offset, where + ": data offset " + std::to_string(ti.offset) + " is not a multiple of the alignment " +
                               std::to_string(al));
  if (ti.offset > data_len || nbytes > data_len - ti.offset)
    c.fail(ti.info_offset, where + ": data [" + std::to_string(ti.offset) + ", +" + std::to_string(nbytes) +
                               ") runs past the data section (" + std::to_string(data_len) + " bytes from file offset " +
                               std::to_string(data_offset) + "; file is " + std::to_string(c.size) + " bytes)");
  TensorView v;
  v.name = ti.name;
  v.file = c.file;
  v.dtype = ti.dtype;
  v.shape.assign(ti.ne.rbegin(), ti.ne.rend());
  v.data = c.base + data_offset + ti.offset;
  v.nbytes = nbytes;
  v.file_offset = data_offset + ti.offset;
  return v;
}

// Refuses two tensors whose data overlap.
void check_no_overlap(const Cursor& c, const std::vector<GgufTensorInfo>& infos,
                      const std::map<std::string, TensorView>& views, uint64_t data_offset) {
  struct Range {
    uint64_t begin, end;
    const GgufTensorInfo* t;
  };
  std::vector<Range> ranges;
  for (const GgufTensorInfo& ti : infos) ranges.push_back({ti.offset, ti.offset + views.at(ti.name).nbytes, &ti});
  std::sort(ranges.begin(), ranges.end(), [](const Range& a, const Range& b) { return a.begin < b.begin; });
  for (size_t k = 1; k < ranges.size(); ++k)
    if (ranges[k].begin < ranges[k - 1].end)
      c.fail(data_offset + ranges[k].begin,
             "tensors '" + ranges[k - 1].t->name + "' [" + std::to_string(ranges[k - 1].begin) + ", " +
                 std::to_string(ranges[k - 1].end) + ") and '" + ranges[k].t->name + "' [" +
                 std::to_string(ranges[k].begin) + ", " + std::to_string(ranges[k].end) + ") overlap in the data section");
}

}  // namespace

size_t gguf_scalar_size(GgufType t) {
  switch (t) {
    case GgufType::U8: case GgufType::I8: case GgufType::BOOL: return 1;
    case GgufType::U16: case GgufType::I16: return 2;
    case GgufType::U32: case GgufType::I32: case GgufType::F32: return 4;
    case GgufType::U64: case GgufType::I64: case GgufType::F64: return 8;
    default: return 0;
  }
}

const char* gguf_type_name(GgufType t) {
  switch (t) {
    case GgufType::U8: return "uint8";
    case GgufType::I8: return "int8";
    case GgufType::U16: return "uint16";
    case GgufType::I16: return "int16";
    case GgufType::U32: return "uint32";
    case GgufType::I32: return "int32";
    case GgufType::F32: return "float32";
    case GgufType::BOOL: return "bool";
    case GgufType::STRING: return "string";
    case GgufType::ARRAY: return "array";
    case GgufType::U64: return "uint64";
    case GgufType::I64: return "int64";
    case GgufType::F64: return "float64";
  }
  return "?";
}

bool GgufValue::is_int() const {
  switch (type) {
    case GgufType::U8: case GgufType::I8: case GgufType::U16: case GgufType::I16: case GgufType::U32:
    case GgufType::I32: case GgufType::U64: case GgufType::I64: case GgufType::BOOL: return true;
    default: return false;
  }
}
bool GgufValue::is_float() const { return type == GgufType::F32 || type == GgufType::F64; }
bool GgufValue::is_numeric_array() const { return type == GgufType::ARRAY && elems != nullptr; }
int64_t GgufValue::int_at(uint64_t k) const { return scalar_int(elem_type, elems + k * gguf_scalar_size(elem_type)); }
double GgufValue::float_at(uint64_t k) const { return scalar_float(elem_type, elems + k * gguf_scalar_size(elem_type)); }

std::unique_ptr<GgufFile> GgufFile::open(const std::filesystem::path& path) {
  std::unique_ptr<GgufFile> g(new GgufFile());
  g->map_ = MappedFile(path);
  Cursor c{g->map_.data(), g->map_.size(), 0, path.string()};
  const Preamble pre = read_preamble(c);
  g->version_ = pre.version;
  g->kv_ = read_metadata(c, pre.n_kv);
  g->alignment_ = read_alignment(c, g->kv_);
  g->infos_ = read_tensor_infos(c, pre.n_tensors);
  // Data section: after the infos, padded to the alignment.
  const uint64_t al = g->alignment_;
  const uint64_t data_off = (c.pos + al - 1) / al * al;
  if (data_off > c.size && !g->infos_.empty())
    c.fail(c.pos, "data section would start at byte " + std::to_string(data_off) + ", past the end of the file");
  g->data_offset_ = std::min(data_off, c.size);
  std::map<std::string, TensorView> all;  // integer tensors too, for the overlap check
  for (const GgufTensorInfo& ti : g->infos_) all.emplace(ti.name, tensor_view(c, ti, al, g->data_offset_));
  check_no_overlap(c, g->infos_, all, g->data_offset_);
  for (const GgufTensorInfo& ti : g->infos_) {
    TensorView& v = all.at(ti.name);
    if (!ti.int_bytes) {
      g->views_.emplace(ti.name, std::move(v));
      continue;
    }
    g->int_views_.emplace(ti.name, Int64Tensor{ti.name, v.file, v.shape, v.data, ti.int_bytes});
  }
  return g;
}

const GgufValue* GgufFile::find(const std::string& key) const {
  auto it = kv_.find(key);
  return it == kv_.end() ? nullptr : &it->second;
}

std::optional<int64_t> GgufFile::get_int(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_int() || v->type == GgufType::BOOL)
    throw Error(path().string() + ": byte " + std::to_string(v->offset) + ": metadata '" + key + "' is " +
                gguf_type_name(v->type) + ", expected an integer");
  return v->i;
}
std::optional<double> GgufFile::get_float(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (!v->is_float() && !(v->is_int() && v->type != GgufType::BOOL))
    throw Error(path().string() + ": byte " + std::to_string(v->offset) + ": metadata '" + key + "' is " +
                gguf_type_name(v->type) + ", expected a number");
  return v->f;
}
std::optional<bool> GgufFile::get_bool(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != GgufType::BOOL)
    throw Error(path().string() + ": byte " + std::to_string(v->offset) + ": metadata '" + key + "' is " +
                gguf_type_name(v->type) + ", expected bool");
  return v->i != 0;
}
std::optional<std::string> GgufFile::get_string(const std::string& key) const {
  const GgufValue* v = find(key);
  if (!v) return std::nullopt;
  if (v->type != GgufType::STRING)
    throw Error(path().string() + ": byte " + std::to_string(v->offset) + ": metadata '" + key + "' is " +
                gguf_type_name(v->type) + ", expected a string");
  return std::string(v->str);
}

bool looks_like_gguf(const std::filesystem::path& path) {
  std::error_code ec;
  if (!std::filesystem::is_regular_file(path, ec)) return false;
  if (path.extension() == ".gguf") return true;
  std::ifstream f(path, std::ios::binary);
  char m[4] = {0, 0, 0, 0};
  f.read(m, 4);
  return f.gcount() == 4 && std::memcmp(m, "GGUF", 4) == 0;
}

}  // namespace g4

#include "model/safetensors.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <cstring>
#include <fstream>
#include <set>

#include "platform/atomic_file.h"
#include "platform/error.h"

namespace g4 {

namespace {

using json = nlohmann::json;

// Largest header we accept: real checkpoints use a few MB; anything larger is corrupt.
constexpr uint64_t kMaxHeaderBytes = 100ull << 20;

uint64_t read_u64_le(const std::byte* p) {
  uint64_t v = 0;
  for (int i = 7; i >= 0; --i) v = (v << 8) | uint64_t(p[i]);
  return v;
}

// The header JSON of a safetensors file: an 8-byte little-endian length, then that many bytes.
json read_header(const MappedFile& file) {
  const std::string fname = file.path().string();
  if (file.size() < 8)
    throw Error(fname + ": not a safetensors file: " + std::to_string(file.size()) +
                " bytes, shorter than the 8-byte header length");
  const uint64_t header_len = read_u64_le(file.data());
  if (header_len > file.size() - 8)
    throw Error(fname + ": header length " + std::to_string(header_len) + " at byte 0 runs past the end of the file (" +
                std::to_string(file.size()) + " bytes): truncated or not safetensors");
  if (header_len > kMaxHeaderBytes)
    throw Error(fname + ": header length " + std::to_string(header_len) + " exceeds the " +
                std::to_string(kMaxHeaderBytes) + "-byte limit");
  const char* hbeg = reinterpret_cast<const char*>(file.data() + 8);
  json header;
  try {
    header = json::parse(hbeg, hbeg + header_len);
  } catch (const json::parse_error& e) {
    throw Error(fname + ": header JSON is malformed at byte " + std::to_string(8 + e.byte) + ": " + e.what());
  } catch (const json::exception& e) {  // out_of_range.406: a number too large (found by fuzz/safetensors_fuzz)
    throw Error(fname + ": header JSON is malformed: " + e.what());
  }
  if (!header.is_object()) throw Error(fname + ": header JSON is not an object");
  return header;
}

// One validated header entry: its data is [begin, end) of the data section.
struct HeaderEntry {
  DType dtype;
  bool int64;  // I64: dtype is unused
  std::vector<int64_t> shape;
  uint64_t begin, end;
};

// Checks header entry t (named in errors by `where`) against the data section of
// data_len bytes starting at file offset data_start of a file_size-byte file.
HeaderEntry parse_entry(const json& t, const std::string& where, uint64_t data_start, uint64_t data_len, uint64_t file_size) {
  if (!t.is_object() || !t.contains("dtype") || !t.contains("shape") || !t.contains("data_offsets"))
    throw Error(where + ": entry needs dtype, shape and data_offsets");
  if (!t["dtype"].is_string()) throw Error(where + ": dtype is not a string");
  const std::string dt = t["dtype"].get<std::string>();
  const bool int64 = dt == "I64";
  auto dtype = int64 ? std::optional<DType>(DType::F32) : dtype_from_name(dt);
  if (!dtype) throw Error(where + ": unsupported dtype " + dt + " (g4 reads F32, F16, BF16 and I64 index tables)");
  const json& shp = t["shape"];
  const json& offs = t["data_offsets"];
  if (!shp.is_array()) throw Error(where + ": shape is not an array");
  if (!offs.is_array() || offs.size() != 2 || !offs[0].is_number_unsigned() || !offs[1].is_number_unsigned())
    throw Error(where + ": data_offsets must be two non-negative integers");
  HeaderEntry e{*dtype, int64, {}, offs[0].get<uint64_t>(), offs[1].get<uint64_t>()};
  uint64_t numel = 1;
  for (const json& d : shp) {
    if (!d.is_number_unsigned()) throw Error(where + ": shape has a non-integer or negative dimension");
    uint64_t v = d.get<uint64_t>();
    if (v > (1ull << 40)) throw Error(where + ": absurd dimension " + std::to_string(v));
    if (v && numel > (1ull << 62) / v) throw Error(where + ": element count overflows");
    numel *= v;
    e.shape.push_back(int64_t(v));
  }
  if (numel > (1ull << 60)) throw Error(where + ": element count overflows");
  const uint64_t expected = numel * (int64 ? 8 : dtype_size(*dtype));
  if (e.end < e.begin)
    throw Error(where + ": data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) + "] end before begin");
  if (e.end - e.begin != expected)
    throw Error(where + ": data_offsets span " + std::to_string(e.end - e.begin) + " bytes but " + dt + " " +
                shape_str(e.shape) + " needs " + std::to_string(expected));
  if (e.end > data_len)
    throw Error(where + ": data_offsets [" + std::to_string(e.begin) + ", " + std::to_string(e.end) +
                "] run past the data section (" + std::to_string(data_len) + " bytes; file offset " +
                std::to_string(data_start + e.end) + " > file size " + std::to_string(file_size) + ")");
  return e;
}

struct NamedRange {
  uint64_t begin, end;
  std::string name;
};

// Refuses two non-empty tensors of file `fname` whose data overlap.
void check_disjoint(const std::string& fname, std::vector<NamedRange> ranges) {
  std::sort(ranges.begin(), ranges.end(), [](const NamedRange& a, const NamedRange& b) { return a.begin < b.begin; });
  const NamedRange* furthest = nullptr;  // the range reaching furthest so far
  for (const NamedRange& r : ranges) {
    if (r.end == r.begin) continue;  // empty tensors occupy no bytes
    if (furthest && r.begin < furthest->end)
      throw Error(fname + ": tensors '" + furthest->name + "' [" + std::to_string(furthest->begin) + ", " +
                  std::to_string(furthest->end) + ") and '" + r.name + "' [" + std::to_string(r.begin) + ", " +
                  std::to_string(r.end) + ") overlap in the data section");
    if (!furthest || r.end > furthest->end) furthest = &r;
  }
}

// Parses and validates one file's header, adding its tensors to `out`.
void index_file(const MappedFile& file, std::map<std::string, TensorView>& out,
                std::map<std::string, Int64Tensor>& out_int64, const std::set<std::string>* wanted,
                uint64_t& data_bytes) {
  const std::string fname = file.path().string();
  const json header = read_header(file);
  const uint64_t data_start = 8 + read_u64_le(file.data());  // after the header read_header checked
  const uint64_t data_len = file.size() - data_start;
  data_bytes += data_len;
  std::vector<NamedRange> ranges;
  for (auto it = header.begin(); it != header.end(); ++it) {
    const std::string& name = it.key();
    if (name == "__metadata__") continue;
    const std::string where = fname + ": tensor '" + name + "'";
    HeaderEntry e = parse_entry(it.value(), where, data_start, data_len, file.size());
    ranges.push_back({e.begin, e.end, name});
    if (wanted && !wanted->count(name)) continue;
    if (out.count(name) || out_int64.count(name)) throw Error(where + ": tensor appears in more than one file");
    if (e.int64) {
      out_int64.emplace(name, Int64Tensor{name, fname, std::move(e.shape), file.data() + data_start + e.begin});
      continue;
    }
    TensorView v;
    v.name = name;
    v.file = fname;
    v.dtype = e.dtype;
    v.shape = std::move(e.shape);
    v.data = file.data() + data_start + e.begin;
    v.nbytes = e.end - e.begin;
    v.file_offset = data_start + e.begin;
    out.emplace(name, std::move(v));
  }
  check_disjoint(fname, std::move(ranges));
}

}  // namespace

SafetensorsArchive SafetensorsArchive::open(const std::filesystem::path& path) {
  namespace fs = std::filesystem;
  SafetensorsArchive ar;
  std::error_code ec;
  if (fs::is_directory(path, ec)) {
    const fs::path index = path / "model.safetensors.index.json";
    const fs::path single = path / "model.safetensors";
    if (fs::exists(index)) {
      std::ifstream f(index);
      json j;
      try {
        j = json::parse(f);
      } catch (const json::parse_error& e) {
        throw Error(index.string() + ": malformed JSON at byte " + std::to_string(e.byte) + ": " + e.what());
      } catch (const json::exception& e) {  // out_of_range.406: a number too large (found by fuzz/safetensors_fuzz)
        throw Error(index.string() + ": malformed JSON: " + e.what());
      }
      if (!j.is_object() || !j.contains("weight_map") || !j["weight_map"].is_object())
        throw Error(index.string() + ": missing object field 'weight_map'");
      std::map<std::string, std::set<std::string>> by_file;
      for (auto it = j["weight_map"].begin(); it != j["weight_map"].end(); ++it) {
        if (!it.value().is_string()) throw Error(index.string() + ": weight_map['" + it.key() + "'] is not a file name");
        const std::string shard = it.value().get<std::string>();
        if (shard.find('/') != std::string::npos || shard.find("..") != std::string::npos)
          throw Error(index.string() + ": weight_map['" + it.key() + "'] names '" + shard + "' outside the directory");
        by_file[shard].insert(it.key());
      }
      if (by_file.empty()) throw Error(index.string() + ": weight_map is empty");
      for (const auto& [shard, names] : by_file) {
        ar.maps_.push_back(std::make_unique<MappedFile>(path / shard));
        index_file(*ar.maps_.back(), ar.tensors_, ar.int64_tensors_, &names, ar.data_bytes_);
        for (const auto& n : names)
          if (!ar.tensors_.count(n) && !ar.int64_tensors_.count(n))
            throw Error(index.string() + ": tensor '" + n + "' is mapped to " + shard + " but that file does not hold it");
      }
      return ar;
    }
    if (fs::exists(single)) {
      ar.maps_.push_back(std::make_unique<MappedFile>(single));
      index_file(*ar.maps_.back(), ar.tensors_, ar.int64_tensors_, nullptr, ar.data_bytes_);
      return ar;
    }
    throw Error(path.string() + ": no model.safetensors or model.safetensors.index.json in this directory");
  }
  ar.maps_.push_back(std::make_unique<MappedFile>(path));
  index_file(*ar.maps_.back(), ar.tensors_, ar.int64_tensors_, nullptr, ar.data_bytes_);
  return ar;
}

const TensorView* SafetensorsArchive::find(const std::string& name) const {
  auto it = tensors_.find(name);
  return it == tensors_.end() ? nullptr : &it->second;
}

std::vector<std::filesystem::path> SafetensorsArchive::files() const {
  std::vector<std::filesystem::path> out;
  for (const auto& m : maps_) out.push_back(m->path());
  return out;
}

bool SafetensorsArchive::contains(const std::byte* p) const {
  for (const auto& m : maps_)
    if (p >= m->data() && p < m->data() + m->size()) return true;
  return false;
}

void SafetensorsArchive::check_unchanged() const {
  for (const auto& m : maps_) m->check_unchanged();
}

uint64_t TensorSpec::nbytes() const {
  if (int64) {
    uint64_t n = 8;
    for (int64_t d : shape) n *= uint64_t(d);
    return n;
  }
  if (shape.empty()) return row_bytes(dtype, 1);
  uint64_t n = row_bytes(dtype, shape.back());  // block types: whole blocks per row
  for (size_t i = 0; i + 1 < shape.size(); ++i) n *= uint64_t(shape[i]);
  return n;
}

void write_safetensors(const std::filesystem::path& path, const std::vector<TensorSpec>& specs,
                       const TensorFiller& fill, const std::map<std::string, std::string>& metadata) {
  json header = json::object();
  if (!metadata.empty()) header["__metadata__"] = metadata;
  uint64_t offset = 0;
  for (const auto& s : specs) {
    header[s.name] = {{"dtype", s.int64 ? std::string("I64") : std::string(dtype_name(s.dtype))}, {"shape", s.shape},
                      {"data_offsets", {offset, offset + s.nbytes()}}};
    offset += s.nbytes();
  }
  std::string htext = header.dump();
  while ((8 + htext.size()) % 8) htext.push_back(' ');  // align the data section to 8 bytes

  AtomicFile f(path);
  const uint64_t hl = htext.size();
  unsigned char len[8];
  for (int i = 0; i < 8; ++i) len[i] = (unsigned char)(hl >> (8 * i));
  f.write(len, 8);
  f.write(htext);
  std::vector<std::byte> buf;
  for (const auto& s : specs) {
    buf.assign(s.nbytes(), std::byte{0});
    fill(s, buf.data());
    f.write(buf.data(), buf.size());
  }
  f.commit();
}

std::vector<std::filesystem::path> write_safetensors_sharded(const std::filesystem::path& dir,
                                                             const std::vector<TensorSpec>& specs,
                                                             const TensorFiller& fill, uint64_t shard_bytes) {
  std::filesystem::create_directories(dir);
  uint64_t total = 0;
  for (const auto& s : specs) total += s.nbytes();
  if (total <= shard_bytes) {
    write_safetensors(dir / "model.safetensors", specs, fill);
    return {dir / "model.safetensors"};
  }
  std::vector<std::vector<TensorSpec>> shards(1);
  uint64_t cur = 0;
  for (const auto& s : specs) {
    if (cur > 0 && cur + s.nbytes() > shard_bytes) {
      shards.emplace_back();
      cur = 0;
    }
    shards.back().push_back(s);
    cur += s.nbytes();
  }
  std::vector<std::filesystem::path> files;
  json weight_map = json::object();
  char name[64];
  for (size_t k = 0; k < shards.size(); ++k) {
    std::snprintf(name, sizeof name, "model-%05zu-of-%05zu.safetensors", k + 1, shards.size());
    write_safetensors(dir / name, shards[k], fill);
    files.push_back(dir / name);
    for (const auto& s : shards[k]) weight_map[s.name] = name;
  }
  json index = {{"metadata", {{"total_size", total}}}, {"weight_map", weight_map}};
  write_file_atomically(dir / "model.safetensors.index.json", index.dump(2) + "\n");
  return files;
}

}  // namespace g4

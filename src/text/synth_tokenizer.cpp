#include "text/synth_tokenizer.h"

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cstdio>
#include <map>
#include <string>
#include <vector>

#include "platform/atomic_file.h"
#include "platform/error.h"
#include "text/utf8.h"
#include "text/vocab.h"

namespace g4::text {

namespace {

using json = nlohmann::json;

// Sample the merges are learned from: everyday English and a little code. Original text.
constexpr const char* kSample = R"(The model reads the text one token at a time and writes the next one.
When you ask a question, it should answer with what it knows and say when it does not know.
This is a small test of the tokenizer, and the words in it are the ones people use most often:
the, of, and, to, in, is, you, that, it, he, was, for, on, are, as, with, his, they, at, be, this,
have, from, or, one, had, by, word, but, not, what, all, were, we, when, your, can, said, there,
use, an, each, which, she, do, how, their, if, will, up, other, about, out, many, then, them,
these, so, some, her, would, make, like, him, into, time, has, look, two, more, write, go, see,
number, no, way, could, people, my, than, first, water, been, call, who, oil, its, now, find,
long, down, day, did, get, come, made, may, part, over, new, sound, take, only, little, work,
know, place, year, live, me, back, give, most, very, after, thing, our, just, name, good,
sentence, man, think, say, great, where, help, through, much, before, line, right, too, mean,
old, any, same, tell, boy, follow, came, want, show, also, around, form, three, small, set,
put, end, does, another, well, large, must, big, even, such, because, turn, here, why, ask,
went, men, read, need, land, different, home, us, move, try, kind, hand, picture, again,
change, off, play, spell, air, away, animal, house, point, page, letter, mother, answer, found,
study, still, learn, should, world, high, every, near, add, food, between, own, below, country.
Hello! How are you today? I am fine, thank you. What time is it? It is ten past three.
The quick brown fox jumps over the lazy dog. Please tell me a story about the sea.
def main():
    for i in range(10):
        print("hello world", i)
    return 0
int main(int argc, char** argv) { return 0; }
if (x == nullptr) { throw std::runtime_error("error"); }
const value = await fetch(url); console.log(value);
import json
class Model:
    def __init__(self, name):
        self.name = name
)";

struct Builder {
  int vocab_size;
  std::vector<std::string> pieces;  // "" = free slot
  std::vector<bool> special;        // added token with special:true
  std::vector<bool> added;          // in added_tokens
  std::map<std::string, int> ids;
  std::vector<std::pair<std::string, std::string>> merges;
  size_t next_free = 0;

  explicit Builder(int n) : vocab_size(n), pieces(size_t(n)), special(size_t(n)), added(size_t(n)) {}

  void put(int id, const std::string& piece, bool is_added, bool is_special) {
    if (id >= vocab_size) return;
    pieces[size_t(id)] = piece;
    added[size_t(id)] = is_added;
    special[size_t(id)] = is_special;
    ids[piece] = id;
  }
  // Next free id at or after 168 (skipping the fixed Gemma slots); -1 when full.
  int take_free() {
    if (next_free < 168) next_free = 168;
    while (next_free < pieces.size() && !pieces[next_free].empty()) ++next_free;
    return next_free < pieces.size() ? int(next_free++) : -1;
  }
  bool add_piece(const std::string& piece) {
    if (ids.count(piece)) return true;
    const int id = take_free();
    if (id < 0) return false;
    put(id, piece, false, false);
    return true;
  }
};

std::vector<std::string> split_chars(const std::string& s) {
  std::vector<std::string> out;
  for (size_t i = 0; i < s.size();) {
    size_t len = utf8_char_length(s, i);
    if (len == 0) len = 1;
    out.push_back(s.substr(i, len));
    i += len;
  }
  return out;
}

// Classic BPE training on the sample: words start at each U+2581 (a space), newlines end them.
void learn_merges(Builder& b, size_t max_merges) {
  std::map<std::vector<std::string>, int> words;
  std::string word;
  auto flush = [&] {
    if (!word.empty()) ++words[split_chars(word)];
    word.clear();
  };
  for (const char* p = kSample; *p; ++p) {
    if (*p == ' ') {
      flush();
      word = std::string(kMetaspace);
    } else if (*p == '\n') {
      flush();
    } else {
      word.push_back(*p);
    }
  }
  flush();
  // Words with a character that has no piece cannot be merged through; drop them.
  for (auto it = words.begin(); it != words.end();) {
    bool ok = std::all_of(it->first.begin(), it->first.end(), [&](const std::string& c) { return b.ids.count(c); });
    it = ok ? std::next(it) : words.erase(it);
  }
  std::vector<std::pair<std::vector<std::string>, int>> ws(words.begin(), words.end());
  for (size_t learned = 0; learned < max_merges; ++learned) {
    std::map<std::pair<std::string, std::string>, int> counts;
    for (const auto& [syms, freq] : ws)
      for (size_t i = 0; i + 1 < syms.size(); ++i) counts[{syms[i], syms[i + 1]}] += freq;
    const std::pair<std::string, std::string>* best = nullptr;
    int best_count = 1;  // a pair seen once is not worth a piece
    for (const auto& [pair, count] : counts)
      if (count > best_count) best = &pair, best_count = count;  // map order breaks ties
    if (!best) return;
    const auto [l, r] = *best;
    if (!b.add_piece(l + r)) return;  // out of ids
    b.merges.emplace_back(l, r);
    for (auto& [syms, freq] : ws) {
      std::vector<std::string> merged;
      for (size_t i = 0; i < syms.size(); ++i) {
        if (i + 1 < syms.size() && syms[i] == l && syms[i + 1] == r) {
          merged.push_back(l + r);
          ++i;
        } else {
          merged.push_back(syms[i]);
        }
      }
      syms = std::move(merged);
    }
  }
}

std::string quote(const std::string& s) { return json(s).dump(); }

// The ids Gemma's layout fixes: specials, unused slots, control tokens, runs of newlines and
// of spaces, and the 256 byte pieces.
void put_fixed_pieces(Builder& b) {
  b.put(0, "<pad>", true, true);
  b.put(1, "<eos>", true, true);
  b.put(2, "<bos>", true, true);
  b.put(3, "<unk>", true, true);
  b.put(4, "<mask>", true, false);
  b.put(5, "[multimodal]", true, false);
  for (int id = 6; id <= 104; ++id) b.put(id, "<unused" + std::to_string(id - 6) + ">", true, false);
  const std::pair<int, const char*> controls[] = {
      {46, "<|tool>"},          {47, "<tool|>"},   {48, "<|tool_call>"}, {49, "<tool_call|>"},
      {50, "<|tool_response>"}, {51, "<tool_response|>"}, {52, "<|\"|>"},  {98, "<|think|>"},
      {100, "<|channel>"},      {101, "<channel|>"}, {105, "<|turn>"},    {106, "<turn|>"},
      {255999, "<|image>"},     {256000, "<|audio>"}, {258880, "<|image|>"}, {258881, "<|audio|>"},
      {258882, "<image|>"},     {258883, "<audio|>"}, {258884, "<|video|>"}};
  for (const auto& [id, piece] : controls) {
    if (id < b.vocab_size) b.ids.erase(b.pieces[size_t(id)]);
    b.put(id, piece, true, true);
  }
  for (int k = 1; k <= 31; ++k) b.put(106 + k, std::string(size_t(k), '\n'), true, false);
  std::string run;
  for (int k = 1; k <= 31; ++k) {
    run += kMetaspace;
    if (k >= 2) b.put(136 + k, run, true, false);
  }
  for (int v = 0; v < 256; ++v) b.put(238 + v, byte_piece(uint8_t(v)), false, false);
}

// Single characters, most useful first (they fill 168..237, then 494..), and merges. With few
// ids left (vocab_size near 512), half of what the common characters leave goes to merges and
// the rare characters fall back to bytes.
void add_characters_and_merges(Builder& b) {
  std::vector<std::string> common = {std::string(kMetaspace)};
  for (char c : std::string("etaoinsrhldcumfpgwybvkxjqz.,'\"-():;!?0123456789")) common.emplace_back(1, c);
  std::vector<std::string> rare;
  for (char c : std::string("TSAIMCBPHWDRLEFNGOJKUVYQXZ_=/<>[]{}#*+&%$@\\|^`~")) rare.emplace_back(1, c);
  rare.emplace_back("\t");
  for (const auto& c : common)
    if (!b.add_piece(c)) break;
  size_t free_ids = 0;
  for (size_t id = 168; id < b.pieces.size(); ++id) free_ids += b.pieces[id].empty();
  const size_t merge_budget = free_ids > 2 * rare.size() ? free_ids - rare.size() : free_ids / 2;

  // Runs of spaces merge first, as in Gemma (their pieces are the added U+2581 runs above).
  std::string one(kMetaspace), two = one + one, four = two + two, eight = four + four;
  for (const auto& [l, r] : std::vector<std::pair<std::string, std::string>>{{one, one}, {two, two}, {four, four}, {eight, eight}})
    if (b.ids.count(l) && b.ids.count(r) && b.ids.count(l + r)) b.merges.emplace_back(l, r);
  if (free_ids > 2 * rare.size()) {
    for (const auto& c : rare) b.add_piece(c);  // room for everything: characters first
    learn_merges(b, merge_budget);
  } else {
    learn_merges(b, merge_budget);
    for (const auto& c : rare)
      if (!b.add_piece(c)) break;
  }
}

// tokenizer.json as the Hugging Face tokenizers library writes a Gemma BPE tokenizer.
std::string tokenizer_json(const Builder& b) {
  std::string out;
  out.reserve(size_t(b.vocab_size) * 24 + 65536);
  out += "{\"version\":\"1.0\",\"truncation\":null,\"padding\":null,\"added_tokens\":[";
  bool first = true;
  for (size_t id = 0; id < b.pieces.size(); ++id) {
    if (!b.added[id]) continue;
    out += first ? "\n" : ",\n";
    first = false;
    out += "{\"id\":" + std::to_string(id) + ",\"content\":" + quote(b.pieces[id]) +
           ",\"single_word\":false,\"lstrip\":false,\"rstrip\":false,\"normalized\":false,\"special\":" +
           (b.special[id] ? "true" : "false") + "}";
  }
  out += "],\n\"normalizer\":{\"type\":\"Replace\",\"pattern\":{\"String\":\" \"},\"content\":\"\xE2\x96\x81\"},\n";
  out += "\"pre_tokenizer\":{\"type\":\"Split\",\"pattern\":{\"String\":\" \"},\"behavior\":\"MergedWithPrevious\",\"invert\":false},\n";
  out += "\"post_processor\":{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<bos>\",\"type_id\":0}},"
         "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"pair\":[{\"SpecialToken\":{\"id\":\"<bos>\",\"type_id\":0}},"
         "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}},{\"SpecialToken\":{\"id\":\"<bos>\",\"type_id\":1}},"
         "{\"Sequence\":{\"id\":\"B\",\"type_id\":1}}],\"special_tokens\":{\"<bos>\":{\"id\":\"<bos>\",\"ids\":[2],"
         "\"tokens\":[\"<bos>\"]}}},\n";
  out += "\"decoder\":{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"Replace\",\"pattern\":{\"String\":\"\xE2\x96\x81\"},"
         "\"content\":\" \"},{\"type\":\"ByteFallback\"},{\"type\":\"Fuse\"}]},\n";
  out += "\"model\":{\"type\":\"BPE\",\"dropout\":null,\"unk_token\":\"<unk>\",\"continuing_subword_prefix\":null,"
         "\"end_of_word_suffix\":null,\"fuse_unk\":true,\"byte_fallback\":true,\"ignore_merges\":false,\n\"vocab\":{";
  for (size_t id = 0; id < b.pieces.size(); ++id) {
    if (id) out += ",";
    if (id % 8 == 0) out += "\n";
    out += quote(b.pieces[id]) + ":" + std::to_string(id);
  }
  out += "},\n\"merges\":[";
  for (size_t r = 0; r < b.merges.size(); ++r) {
    out += r ? ",\n" : "\n";
    out += "[" + quote(b.merges[r].first) + "," + quote(b.merges[r].second) + "]";
  }
  out += "]}}\n";
  return out;
}

json tokenizer_config_json() {
  return {{"add_bos_token", true},       {"add_eos_token", false},       {"bos_token", "<bos>"},
          {"eos_token", "<eos>"},        {"pad_token", "<pad>"},         {"unk_token", "<unk>"},
          {"mask_token", "<mask>"},      {"sot_token", "<|turn>"},       {"eot_token", "<turn|>"},
          {"soc_token", "<|channel>"},   {"eoc_token", "<channel|>"},    {"think_token", "<|think|>"},
          {"escape_token", "<|\"|>"},    {"padding_side", "left"},       {"tokenizer_class", "GemmaTokenizer"},
          {"clean_up_tokenization_spaces", false}, {"spaces_between_special_tokens", false},
          {"g4_synthetic", true}};
}

}  // namespace

void write_synth_tokenizer(const std::filesystem::path& dir, int vocab_size,
                           const std::vector<std::pair<int, std::string>>& moved_controls) {
  if (vocab_size < 512)
    throw Error("synth tokenizer: vocab_size " + std::to_string(vocab_size) +
                " is below 512 (Gemma's layout needs ids up to 493 for the byte pieces)");
  if (vocab_size > (1 << 24)) throw Error("synth tokenizer: vocab_size " + std::to_string(vocab_size) + " is too large");
  Builder b(vocab_size);
  put_fixed_pieces(b);
  for (const auto& [id, piece] : moved_controls) {
    if (id < 168 || id >= vocab_size)
      throw Error("synth tokenizer: control token " + piece + " at id " + std::to_string(id) + " is outside 168.." +
                  std::to_string(vocab_size - 1) + " (the fixed Gemma slots end at 167)");
    if (const auto it = b.ids.find(piece); it != b.ids.end()) {  // its Gemma slot, when the vocabulary reaches it
      b.pieces[size_t(it->second)].clear();
      b.ids.erase(it);
    }
    if (!b.pieces[size_t(id)].empty()) b.ids.erase(b.pieces[size_t(id)]);
    b.put(id, piece, true, true);
  }
  add_characters_and_merges(b);
  for (size_t id = 0; id < b.pieces.size(); ++id)
    if (b.pieces[id].empty()) b.pieces[id] = "<unused" + std::to_string(id - 6) + ">";
  const std::string out = tokenizer_json(b);
  const json config = tokenizer_config_json();
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) throw Error(dir.string() + ": cannot create directory: " + ec.message());
  write_file_atomically(dir / "tokenizer.json", out);
  write_file_atomically(dir / "tokenizer_config.json", config.dump(2) + "\n");
}

}  // namespace g4::text

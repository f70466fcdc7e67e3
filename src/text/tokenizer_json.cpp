#include "text/tokenizer_json.h"

#include <nlohmann/json.hpp>

#include <fstream>
#include <sstream>

#include "platform/error.h"
#include "platform/mapped_file.h"

namespace g4::text {

namespace {

using json = nlohmann::json;

// One added_tokens[] entry.
struct AddedToken {
  int64_t id = -1;
  std::string content;
  bool special = false, have_content = false;
};

// SAX handler. Where it is in the document is a stack of frames; each frame knows what it holds
// (Ctx). The big arrays (model.vocab, model.merges) are consumed straight into vectors; small
// subtrees (normalizer, pre_tokenizer, decoder, ...) are built as json DOMs for validation.
class Handler : public nlohmann::json_sax<json> {
 public:
  explicit Handler(std::string source) : source_(std::move(source)) {}

  std::string source_;
  std::string error_;  // first semantic error; returning false stops the parser
  std::vector<std::string> vocab_pieces;
  std::vector<bool> vocab_filled;
  size_t vocab_count = 0, max_vocab_id = 0;
  MergeList merges;
  std::vector<AddedToken> added;
  json model_fields = json::object();  // model.* scalars and small subtrees
  json top_fields = json::object();    // normalizer, pre_tokenizer, decoder, post_processor, ...
  bool saw_model = false, saw_vocab = false;

 private:
  enum class Ctx { Root, AddedTokens, AddedToken, Model, Vocab, Merges, MergePair, Dom, Skip };
  struct Frame {
    Ctx ctx;
    bool is_array;
    std::string key;       // current key (objects)
    json* dom = nullptr;   // Dom frames: the node being filled
  };
  // The merge pair being read ([left, right]); one buffer reused for all 515k pairs.
  std::string pair_[2];
  size_t pair_size_ = 0;
  std::vector<Frame> stack_;

  bool vocab_entry(uint64_t id64) {
    Frame& f = stack_.back();
    if (id64 >= (uint64_t(1) << 24))
      return fail("model.vocab[\"" + f.key + "\"] = " + std::to_string(id64) + " is not a plausible token id");
    const size_t id = size_t(id64);
    if (id >= vocab_pieces.size()) {
      vocab_pieces.resize(std::max(id + 1, vocab_pieces.size() * 2));
      vocab_filled.resize(vocab_pieces.size(), false);
    }
    if (vocab_filled[id])
      return fail("model.vocab: id " + std::to_string(id) + " is given to both \"" + vocab_pieces[id] + "\" and \"" +
                  f.key + "\"");
    vocab_pieces[id] = std::move(f.key);
    vocab_filled[id] = true;
    ++vocab_count;
    max_vocab_id = std::max(max_vocab_id, id);
    return true;
  }

  bool fail(const std::string& msg) {
    if (error_.empty()) error_ = msg;
    return false;
  }
  std::string where() const {
    std::string w;
    for (const auto& f : stack_)
      if (!f.is_array && !f.key.empty()) w += (w.empty() ? "" : ".") + f.key;
    return w.empty() ? "top level" : w;
  }

  // Places a scalar or a new container value in a Dom frame; returns the new node.
  json* dom_put(Frame& f, json v) {
    if (f.is_array) {
      f.dom->push_back(std::move(v));
      return &f.dom->back();
    }
    json& slot = (*f.dom)[f.key];
    slot = std::move(v);
    return &slot;
  }

  bool scalar(json v) {
    if (stack_.empty()) return fail("the document is not a JSON object");
    Frame& f = stack_.back();
    switch (f.ctx) {
      case Ctx::Root:
        top_fields[f.key] = std::move(v);
        return true;
      case Ctx::Model:
        model_fields[f.key] = std::move(v);
        return true;
      case Ctx::AddedToken: {
        AddedToken& t = added.back();
        if (f.key == "id") {
          if (!v.is_number_integer() || v.get<int64_t>() < 0)
            return fail("added_tokens[" + std::to_string(added.size() - 1) + "].id is not a non-negative integer");
          t.id = v.get<int64_t>();
        } else if (f.key == "content") {
          if (!v.is_string()) return fail("added_tokens[" + std::to_string(added.size() - 1) + "].content is not a string");
          t.content = v.get<std::string>();
          t.have_content = true;
        } else if (f.key == "special") {
          t.special = v.is_boolean() && v.get<bool>();
        }
        return true;
      }
      case Ctx::Vocab:
        return fail("model.vocab[\"" + f.key + "\"] is not a token id (a non-negative integer)");
      case Ctx::Merges: {
        // Legacy form: "left right" in one string.
        if (!v.is_string()) return fail("model.merges[" + std::to_string(merges.size()) + "] is not a string or pair");
        const std::string& s = v.get_ref<const std::string&>();
        const size_t sp = s.find(' ');
        if (sp == std::string::npos || s.find(' ', sp + 1) != std::string::npos)
          return fail("model.merges[" + std::to_string(merges.size()) + "] \"" + s + "\" is not \"left right\"");
        merges.add(std::string_view(s).substr(0, sp), std::string_view(s).substr(sp + 1));
        return true;
      }
      case Ctx::MergePair:
        if (!v.is_string()) return fail("model.merges[" + std::to_string(merges.size()) + "] holds a non-string");
        return fail("model.merges[" + std::to_string(merges.size()) + "] holds a non-string");
      case Ctx::Dom:
        dom_put(f, std::move(v));
        return true;
      case Ctx::AddedTokens:
        return fail("added_tokens holds a non-object");
      case Ctx::Skip:
        return true;
    }
    return true;
  }

  bool open(bool is_array) {
    if (stack_.empty()) {
      if (is_array) return fail("the document is an array, not a tokenizer.json object");
      stack_.push_back({Ctx::Root, false, {}, nullptr});
      return true;
    }
    Frame& parent = stack_.back();
    Frame child{Ctx::Skip, is_array, {}, nullptr};
    switch (parent.ctx) {
      case Ctx::Root:
        if (parent.key == "added_tokens" && is_array) {
          child.ctx = Ctx::AddedTokens;
        } else if (parent.key == "model" && !is_array) {
          child.ctx = Ctx::Model;
          saw_model = true;
        } else {
          child.ctx = Ctx::Dom;
          child.dom = &(top_fields[parent.key] = is_array ? json::array() : json::object());
        }
        break;
      case Ctx::AddedTokens:
        if (is_array) return fail("added_tokens[" + std::to_string(added.size()) + "] is not an object");
        child.ctx = Ctx::AddedToken;
        added.emplace_back();
        break;
      case Ctx::Model:
        if (parent.key == "vocab") {
          if (is_array) return fail("model.vocab is an array (Unigram?); only BPE's {piece: id} map is supported");
          child.ctx = Ctx::Vocab;
          saw_vocab = true;
          vocab_pieces.resize(1 << 18);
          vocab_filled.resize(1 << 18, false);
        } else if (parent.key == "merges") {
          if (!is_array) return fail("model.merges is not an array");
          child.ctx = Ctx::Merges;
          merges.reserve(1 << 19, 1 << 23);
        } else {
          child.ctx = Ctx::Dom;
          child.dom = &(model_fields[parent.key] = is_array ? json::array() : json::object());
        }
        break;
      case Ctx::Merges:
        if (!is_array) return fail("model.merges[" + std::to_string(merges.size()) + "] is an object");
        child.ctx = Ctx::MergePair;
        pair_size_ = 0;
        break;
      case Ctx::Dom:
        child.ctx = Ctx::Dom;
        child.dom = dom_put(parent, is_array ? json::array() : json::object());
        break;
      case Ctx::AddedToken:
      case Ctx::Vocab:
      case Ctx::MergePair:
      case Ctx::Skip:
        if (parent.ctx == Ctx::Vocab) return fail("model.vocab[\"" + parent.key + "\"] is not an integer id");
        if (parent.ctx == Ctx::MergePair) return fail("model.merges[" + std::to_string(merges.size()) + "] is nested");
        child.ctx = Ctx::Skip;  // e.g. an unexpected object inside an added token: ignored
        break;
    }
    stack_.push_back(std::move(child));
    return true;
  }

  bool close() {
    Frame& f = stack_.back();
    if (f.ctx == Ctx::MergePair) {
      if (pair_size_ != 2)
        return fail("model.merges[" + std::to_string(merges.size()) + "] has " + std::to_string(pair_size_) +
                    " parts, not 2");
      merges.add(pair_[0], pair_[1]);
      pair_size_ = 0;
    }
    stack_.pop_back();
    return true;
  }

 public:
  bool null() override { return scalar(nullptr); }
  bool boolean(bool v) override { return scalar(v); }
  bool number_integer(number_integer_t v) override { return scalar(v); }
  bool number_unsigned(number_unsigned_t v) override {
    if (!stack_.empty() && stack_.back().ctx == Ctx::Vocab) return vocab_entry(v);
    return scalar(v);
  }
  bool number_float(number_float_t v, const string_t&) override { return scalar(v); }
  // The two hot paths (515k merge pairs, 262k vocab ids) skip building a json value.
  bool string(string_t& v) override {
    if (!stack_.empty() && stack_.back().ctx == Ctx::MergePair) {
      if (pair_size_ < 2) pair_[pair_size_].swap(v);
      ++pair_size_;
      return true;
    }
    return scalar(std::move(v));
  }
  bool binary(binary_t&) override { return fail("binary values are not JSON"); }
  bool start_object(std::size_t) override { return open(false); }
  bool start_array(std::size_t) override { return open(true); }
  bool end_object() override { return close(); }
  bool end_array() override { return close(); }
  bool key(string_t& k) override {
    stack_.back().key = std::move(k);
    return true;
  }
  bool parse_error(std::size_t position, const std::string&, const nlohmann::detail::exception& ex) override {
    error_ = "invalid JSON at byte " + std::to_string(position) + " (inside " + where() + "): " + ex.what();
    return false;
  }
};

bool is_metaspace_replace(const json& n) {
  return n.is_object() && n.value("type", "") == "Replace" && n.contains("pattern") && n["pattern"].is_object() &&
         n["pattern"].value("String", "") == " " && n.value("content", "") == "\xE2\x96\x81";
}

// Gemma: Replace(" " -> U+2581). A Sequence of exactly that is the same thing.
bool read_normalizer(const json& n, const std::string& src) {
  if (n.is_null()) return false;
  if (is_metaspace_replace(n)) return true;
  if (n.is_object() && n.value("type", "") == "Sequence" && n.contains("normalizers") &&
      n["normalizers"].is_array() && n["normalizers"].size() == 1 && is_metaspace_replace(n["normalizers"][0]))
    return true;
  throw Error(src + ": normalizer " + n.dump().substr(0, 200) +
              " is not supported (only Gemma's Replace \" \" -> U+2581, or none)");
}

// After the metaspace normalizer there are no spaces left, so Split(" ") changes nothing.
void check_pre_tokenizer(const json& p, const std::string& src) {
  if (p.is_null()) return;
  if (p.is_object() && p.value("type", "") == "Split" && p.contains("pattern") && p["pattern"].is_object() &&
      p["pattern"].value("String", "") == " ")
    return;
  throw Error(src + ": pre_tokenizer " + p.dump().substr(0, 200) +
              " is not supported (only Gemma's Split on \" \", or none)");
}

std::string read_whole_file(const std::filesystem::path& p) {
  std::ifstream f(p, std::ios::binary);
  if (!f) throw Error(p.string() + ": cannot open");
  std::ostringstream ss;
  ss << f.rdbuf();
  return ss.str();
}

}  // namespace

VocabularySpec parse_tokenizer_json(std::string_view text, const std::string& src) {
  Handler h(src);
  const bool ok = json::sax_parse(text.begin(), text.end(), &h, json::input_format_t::json, true);
  if (!ok || !h.error_.empty()) throw Error(src + ": " + (h.error_.empty() ? "invalid JSON" : h.error_));
  if (!h.saw_model) throw Error(src + ": no \"model\" object (is this a tokenizer.json?)");
  const json& m = h.model_fields;
  const std::string type = m.contains("type") && m["type"].is_string() ? m["type"].get<std::string>() : "";
  if (type != "BPE")
    throw Error(src + ": model.type is \"" + type + "\"; only BPE tokenizers (as Gemma ships) are supported");
  if (!h.saw_vocab || h.vocab_count == 0) throw Error(src + ": model.vocab is missing or empty");
  for (const char* k : {"continuing_subword_prefix", "end_of_word_suffix"})
    if (m.contains(k) && m[k].is_string() && !m[k].get<std::string>().empty())
      throw Error(src + ": model." + k + " is set; subword prefixes/suffixes are not supported");
  if (m.contains("ignore_merges") && m["ignore_merges"].is_boolean() && m["ignore_merges"].get<bool>())
    throw Error(src + ": model.ignore_merges is true; not supported");

  VocabularySpec spec;
  spec.source = src;
  spec.byte_fallback = m.contains("byte_fallback") && m["byte_fallback"].is_boolean() && m["byte_fallback"].get<bool>();
  spec.fuse_unk = m.contains("fuse_unk") && m["fuse_unk"].is_boolean() && m["fuse_unk"].get<bool>();
  if (m.contains("unk_token") && m["unk_token"].is_string()) spec.unk_piece = m["unk_token"].get<std::string>();
  const json& top = h.top_fields;
  spec.space_to_metaspace = read_normalizer(top.contains("normalizer") ? top["normalizer"] : json(), src);
  check_pre_tokenizer(top.contains("pre_tokenizer") ? top["pre_tokenizer"] : json(), src);
  // post_processor single = "<bos> $A" is what add_bos means; tokenizer_config's add_bos_token rules.
  spec.add_bos = false;
  if (top.contains("post_processor") && top["post_processor"].is_object()) {
    const json& single = top["post_processor"].value("single", json::array());
    spec.add_bos = single.is_array() && !single.empty() && single[0].is_object() && single[0].contains("SpecialToken");
    if (spec.add_bos && single[0]["SpecialToken"].is_object() && single[0]["SpecialToken"].contains("id") &&
        single[0]["SpecialToken"]["id"].is_string())
      spec.named_tokens["bos_token"] = single[0]["SpecialToken"]["id"].get<std::string>();
  }

  // Vocabulary ids must be dense; added tokens may extend it (Gemma 3's <image_soft_token> = 262144).
  size_t n = h.max_vocab_id + 1;
  for (const AddedToken& t : h.added) {
    if (t.id < 0 || !t.have_content) throw Error(src + ": an added_tokens entry lacks id or content");
    n = std::max(n, size_t(t.id) + 1);
  }
  h.vocab_pieces.resize(n);
  h.vocab_filled.resize(n, false);
  std::vector<bool> is_added(n, false);
  spec.types.assign(n, TokenType::Normal);
  for (const AddedToken& t : h.added) {
    const size_t id = size_t(t.id);
    if (h.vocab_filled[id] && h.vocab_pieces[id] != t.content)
      throw Error(src + ": added token " + std::to_string(id) + " \"" + t.content + "\" differs from model.vocab's \"" +
                  h.vocab_pieces[id] + "\"");
    if (is_added[id]) throw Error(src + ": added token id " + std::to_string(id) + " appears twice");
    h.vocab_pieces[id] = t.content;
    h.vocab_filled[id] = true;
    is_added[id] = true;
    spec.types[id] = t.special ? TokenType::Control : TokenType::UserDefined;
    spec.added_token_ids.push_back(int32_t(id));
  }
  for (size_t id = 0; id < n; ++id)
    if (!h.vocab_filled[id])
      throw Error(src + ": token id " + std::to_string(id) + " is missing from model.vocab (ids must be 0.." +
                  std::to_string(n - 1) + ")");
  if (!spec.unk_piece.empty())
    for (size_t id = 0; id < n; ++id)
      if (h.vocab_pieces[id] == spec.unk_piece) spec.types[id] = TokenType::Unknown;
  spec.pieces = std::move(h.vocab_pieces);
  spec.merges = std::move(h.merges);
  return spec;
}

void apply_tokenizer_config(std::string_view text, const std::string& src, VocabularySpec& spec) {
  json c;
  try {
    c = json::parse(text.begin(), text.end());
  } catch (const json::exception& e) {  // parse_error, or out_of_range.406 for a number too large
    throw Error(src + ": invalid JSON: " + e.what());
  }
  if (!c.is_object()) throw Error(src + ": not a JSON object");
  if (c.contains("add_bos_token") && c["add_bos_token"].is_boolean()) spec.add_bos = c["add_bos_token"].get<bool>();
  // "bos_token": "<bos>" or {"content": "<bos>", ...}; extra_special_tokens holds more of the same.
  auto take = [&](const std::string& role, const json& v) {
    if (v.is_string()) spec.named_tokens[role] = v.get<std::string>();
    else if (v.is_object() && v.contains("content") && v["content"].is_string())
      spec.named_tokens[role] = v["content"].get<std::string>();
  };
  for (auto it = c.begin(); it != c.end(); ++it) {
    const std::string& k = it.key();
    if (k.size() > 6 && k.compare(k.size() - 6, 6, "_token") == 0) take(k, it.value());
  }
  if (c.contains("extra_special_tokens") && c["extra_special_tokens"].is_object())
    for (auto it = c["extra_special_tokens"].begin(); it != c["extra_special_tokens"].end(); ++it)
      if (!spec.named_tokens.count(it.key())) take(it.key(), it.value());
}

VocabularySpec read_tokenizer_json(const std::filesystem::path& tokenizer_json,
                                   const std::filesystem::path& tokenizer_config) {
  MappedFile file(tokenizer_json);
  VocabularySpec spec = parse_tokenizer_json(
      std::string_view(reinterpret_cast<const char*>(file.data()), size_t(file.size())), tokenizer_json.string());
  if (!tokenizer_config.empty() && std::filesystem::exists(tokenizer_config))
    apply_tokenizer_config(read_whole_file(tokenizer_config), tokenizer_config.string(), spec);
  return spec;
}

}  // namespace g4::text

// A small tokenizer in Gemma 4's format for synthetic checkpoints (`g4 synth`), so a synth
// directory is complete with nothing downloaded. Layout (ids as in Gemma 4):
//   0 <pad>  1 <eos>  2 <bos>  3 <unk>  4 <mask>  5 [multimodal]   6..104 <unusedK> (K = id-6) except
//   46 <|tool> 47 <tool|> 48 <|tool_call> 49 <tool_call|> 50 <|tool_response> 51 <tool_response|>
//   52 <|"|> 98 <|think|> 100 <|channel> 101 <channel|>;  105 <|turn> 106 <turn|>;
//   107..137 "\n" x1..31 and 138..167 U+2581 x2..31 (added tokens, as in Gemma);
//   168..237 and 494.. single characters (U+2581, printable ASCII, tab), then pieces from BPE merges
//   learned on a small built-in English/code sample; 238..493 <0x00>..<0xFF>;
//   when vocab_size reaches them: 255999 <|image> 256000 <|audio> 258880 <|image|> 258881 <|audio|>
//   258882 <image|> 258883 <audio|> 258884 <|video|>.
// Ids left over are padded with "<unusedN>" pieces in model.vocab only (not added tokens), so
// every id 0..vocab_size-1 has a piece: a 262,144-id synth writes ~5 MB, not Gemma's 33 MB.
// With vocab_size 512 only 88 ids are free (168..237, 494..511): the common characters
// (U+2581, lower case, digits, basic punctuation) take 48, half the rest go to merges and the
// rarest characters (upper case, symbols) use byte fallback. Still a valid, complete tokenizer.
#pragma once
#include <filesystem>
#include <string>
#include <utility>
#include <vector>

namespace g4::text {

// Writes dir/tokenizer.json and dir/tokenizer_config.json atomically (temp file + rename).
// Throws g4::Error when vocab_size < 512 or > 2^24 or a file cannot be written.
// `moved_controls` puts control tokens at other ids (>= 168), as small test checkpoints move
// them: the tiny vision fixtures keep <|image> 500, <|image|> 501, <image|> 502 in a 512-id vocab.
void write_synth_tokenizer(const std::filesystem::path& dir, int vocab_size,
                           const std::vector<std::pair<int, std::string>>& moved_controls = {});

}  // namespace g4::text

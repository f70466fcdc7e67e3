// Image positions in the text decoder (docs/vision.md, "Image positions in the decoder") against
// the shared vision fixtures, an independent float64 transcription of transformers: the
// fixtures' soft tokens at the <|image|> rows, on the reference pass, the cached pass's
// reference loops and its SIMD path; batching and chunking bit-exact on the SIMD path; the
// manifest's mistakes moving the logits far past the tolerance; a split image refused.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <algorithm>
#include <cmath>
#include <functional>
#include <memory>

#include "model/dense_kv_store.h"
#include "model/forward_cached.h"
#include "model/forward_reference.h"
#include "model/model.h"
#include "platform/error.h"
#include "platform/thread_pool.h"
#include "test_util.h"

namespace g4 {
namespace image_positions {  // named: the unity build puts test files together
namespace {

using json = nlohmann::json;

std::filesystem::path image_fixture_dir(const std::string& variant) {
  return test::fixtures_dir() / "gemma4-vision-tiny" / variant;
}

// One fixture sequence: its tokens, its images' soft tokens placed at their spans, the
// expected logits [T, V].
struct ImageSequence {
  std::string name;
  json manifest;  // the manifest's entry for this sequence
  std::vector<int> tokens;
  std::vector<std::vector<float>> soft_rows;  // per image, [S, H]
  std::vector<SoftSpan> spans;
  std::vector<float> logits;
  int64_t T() const { return int64_t(tokens.size()); }
  // The span holding position p, or null.
  const SoftSpan* span_at(int64_t p) const {
    for (const SoftSpan& s : spans)
      if (p >= s.first_pos && p < s.end_pos()) return &s;
    return nullptr;
  }
};

ImageSequence load_sequence(const std::string& variant, const std::string& name, const ModelConfig& c) {
  const auto dir = image_fixture_dir(variant);
  const json manifest = json::parse(test::read_file(dir / "manifest.json"));
  ImageSequence s;
  s.name = variant + "/" + name;
  s.manifest = manifest["sequences"][name];
  s.tokens = test::read_i32(dir / "expected" / (name + ".tokens.i32"));
  s.logits = test::read_f32(dir / "expected" / (name + ".logits.f32"));
  const auto images = s.manifest["images"].get<std::vector<std::string>>();
  const auto where = s.manifest["image_token_positions"];
  EXPECT_EQ(images.size(), where.size()) << s.name;
  for (size_t i = 0; i < images.size(); ++i)
    s.soft_rows.push_back(test::read_f32(dir / "expected" / (images[i] + ".soft_tokens.f32")));
  for (size_t i = 0; i < images.size(); ++i) {
    const int64_t first = where[i][0].get<int64_t>(), count = where[i][1].get<int64_t>();
    EXPECT_EQ(s.soft_rows[i].size(), size_t(count * c.hidden_size)) << s.name << " image " << i;
    for (int64_t p = first; p < first + count; ++p)  // the spans are where the placeholders are
      EXPECT_EQ(s.tokens[size_t(p)], c.image_token_id.value_or(-1)) << s.name << " position " << p;
    s.spans.push_back({s.soft_rows[i].data(), first, count, true});
  }
  return s;
}

// Checks the fixture's tolerance over every logit row: max |Δ| <= 1e-3 and the argmax equal
// wherever the expected top-2 margin exceeds 2e-3. Returns max |Δ|.
float expect_matches(const std::vector<float>& got, const ImageSequence& s, int64_t V, const std::string& what) {
  EXPECT_EQ(got.size(), s.logits.size()) << what;
  if (got.size() != s.logits.size()) return INFINITY;
  const float worst = test::max_abs_diff(got.data(), s.logits.data(), got.size());
  EXPECT_LE(worst, 1e-3f) << what;
  for (int64_t t = 0; t < s.T(); ++t) {
    const float* want = &s.logits[size_t(t * V)];
    const float* mine = &got[size_t(t * V)];
    std::vector<float> sorted(want, want + V);
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
    if (sorted[0] - sorted[1] <= 2e-3f) continue;
    EXPECT_EQ(std::max_element(mine, mine + V) - mine, std::max_element(want, want + V) - want)
        << what << " row " << t;
  }
  std::printf("[ image ] %-40s max |delta| = %.3g\n", what.c_str(), worst);
  return worst;
}

// Rows of one sequence for positions [begin, end), every one asking for logits.
std::vector<BatchRow> rows_of(const ImageSequence& s, int seq, int64_t begin, int64_t end) {
  std::vector<BatchRow> rows;
  for (int64_t p = begin; p < end; ++p) rows.push_back({seq, p, s.tokens[size_t(p)], true, s.span_at(p)});
  return rows;
}

// forward_cached over the sequence in steps ending at each of `cuts` (and at T); the logits of
// every row, [T, V].
std::vector<float> cached(const Model& m, const ImageSequence& s, const blocks::Exec& ex, std::vector<int64_t> cuts = {}) {
  DenseKvStore kv(m.config);
  const int seq = kv.add_sequence();
  cuts.push_back(s.T());
  std::vector<float> all, step;
  int64_t begin = 0;
  for (int64_t end : cuts) {
    forward_cached(m, rows_of(s, seq, begin, end), kv, ex, step);
    all.insert(all.end(), step.begin(), step.end());
    begin = end;
  }
  return all;
}

// The SIMD path with its work split as finely as the tiny model allows: attention slices of 16
// keys on the pool, row-wise steps split over it.
struct Simd {
  ThreadPool pool{2};
  ops::MatmulContext mm{&pool, 4};
  blocks::Exec ex;
  Simd() {
    ex.matmul = &mm;
    ex.attention_slice = 16;
    ex.attention_parallel_min_fmas = 0;
    ex.row_parallel_min_values = 64;
  }
};

struct Variant {
  const char* name;
  bool vision_rule;
};
constexpr Variant kVariants[] = {{"tiny-e-vision", false}, {"tiny-31b-vision", true}};
constexpr const char* kSequences[] = {"two_images", "one_image"};

TEST(ImagePositions, ConfigsCarryTheRuleAndTheMovedTokenIds) {
  for (const Variant& v : kVariants) {
    const ModelConfig c = load_config(image_fixture_dir(v.name) / "hf" / "config.json");
    EXPECT_EQ(c.vision_bidirectional(), v.vision_rule) << v.name;
    EXPECT_EQ(c.image_token_id, 501) << v.name;
    EXPECT_EQ(c.boi_token_id, 500) << v.name;
    EXPECT_EQ(c.eoi_token_id, 502) << v.name;
    EXPECT_EQ(c.video_token_id, 503) << v.name;
    EXPECT_EQ(c.audio_token_id, 504) << v.name;
  }
}

TEST(ImagePositions, ReferenceMatchesTheFixtures) {
  for (const Variant& v : kVariants) {
    const auto m = load_model(image_fixture_dir(v.name) / "hf");
    const int64_t V = m->config.vocab_size;
    for (const char* name : kSequences) {
      const ImageSequence s = load_sequence(v.name, name, m->config);
      expect_matches(forward_reference(*m, s.tokens, s.spans), s, V, s.name + " reference");
    }
  }
}

TEST(ImagePositions, CachedPassMatchesTheFixturesOnBothPaths) {
  Simd simd;
  for (const Variant& v : kVariants) {
    const auto m = load_model(image_fixture_dir(v.name) / "hf");
    const int64_t V = m->config.vocab_size;
    for (const char* name : kSequences) {
      const ImageSequence s = load_sequence(v.name, name, m->config);
      expect_matches(cached(*m, s, {}), s, V, s.name + " cached, reference loops");
      expect_matches(cached(*m, s, simd.ex), s, V, s.name + " cached, SIMD");
      expect_matches(cached(*m, s, blocks::Exec{&simd.mm}), s, V, s.name + " cached, SIMD default slices");
    }
  }
}

// The one_image sequence gives the same bits alone in one step, beside two_images in the same
// step, and in chunks: for the causal variant chunks that cut through the image (shorter and
// longer than its window of 8), for the "vision" one chunks that keep the image whole.
TEST(ImagePositions, BatchingAndChunkingAreBitExactOnTheSimdPath) {
  Simd simd;
  for (const Variant& v : kVariants) {
    const auto m = load_model(image_fixture_dir(v.name) / "hf");
    const size_t V = size_t(m->config.vocab_size);
    const ImageSequence one = load_sequence(v.name, "one_image", m->config);
    const ImageSequence two = load_sequence(v.name, "two_images", m->config);
    const std::vector<float> alone = cached(*m, one, simd.ex), two_alone = cached(*m, two, simd.ex);
    DenseKvStore kv(m->config);
    const int a = kv.add_sequence(), b = kv.add_sequence();
    std::vector<BatchRow> rows = rows_of(two, a, 0, two.T());
    const std::vector<BatchRow> more = rows_of(one, b, 0, one.T());
    rows.insert(rows.end(), more.begin(), more.end());
    std::vector<float> both;
    forward_cached(*m, rows, kv, simd.ex, both);
    ASSERT_EQ(both.size(), (two_alone.size() + alone.size()));
    EXPECT_TRUE(std::equal(alone.begin(), alone.end(), both.begin() + ptrdiff_t(size_t(two.T()) * V))) << v.name;
    EXPECT_TRUE(std::equal(two_alone.begin(), two_alone.end(), both.begin())) << v.name;
    // one_image's image is at [7, 71).
    const std::vector<int64_t> cuts = v.vision_rule ? std::vector<int64_t>{3, 7, 71, 76, 77, 78}
                                                    : std::vector<int64_t>{3, 10, 37, 50, 71, 75, 77, 78};
    EXPECT_EQ(cached(*m, one, simd.ex, cuts), alone) << v.name;
  }
}

float moved(const std::vector<float>& got, const ImageSequence& s) {
  return got.size() == s.logits.size() ? test::max_abs_diff(got.data(), s.logits.data(), got.size()) : INFINITY;
}

// Each mistake the manifest lists for a variant, made on purpose, moves the logits by about the
// manifest's figure: far past the 1e-3 tolerance, so the checks above would catch it.
TEST(ImagePositions, TheManifestsMistakesMoveTheLogitsFarPastTheTolerance) {
  for (const Variant& v : kVariants) {
    const auto m = load_model(image_fixture_dir(v.name) / "hf");
    ModelConfig& c = m->config;
    const float sqrt_h = std::sqrt(float(c.hidden_size));
    for (const char* name : kSequences) {
      const ImageSequence s = load_sequence(v.name, name, c);
      const json& want = s.manifest["discrimination_max_abs_logit_change"];
      auto expect_moved = [&](float d, const char* mistake) {
        std::printf("[ mistake ] %-28s %-34s moves %.4g (manifest %.4g)\n", s.name.c_str(), mistake, d,
                    want[mistake].get<double>());
        EXPECT_GT(d, 1.0f) << s.name << " " << mistake;
        EXPECT_NEAR(d, want[mistake].get<double>(), 1e-2) << s.name << " " << mistake;
      };
      // Soft tokens scaled by sqrt(H) like text embeddings.
      std::vector<std::vector<float>> scaled = s.soft_rows;
      std::vector<SoftSpan> scaled_spans = s.spans;
      for (size_t i = 0; i < scaled.size(); ++i) {
        for (float& x : scaled[i]) x *= sqrt_h;
        scaled_spans[i].rows = scaled[i].data();
      }
      expect_moved(moved(forward_reference(*m, s.tokens, scaled_spans), s), "soft_tokens_scaled_by_sqrt_hidden");
      if (c.has_ple()) {  // the per-layer table row of the placeholder id instead of the pad row
        const int pad = c.pad_token_id;
        c.pad_token_id = *c.image_token_id;
        expect_moved(moved(forward_reference(*m, s.tokens, s.spans), s), "ple_row_of_placeholder_id_instead_of_pad");
        c.pad_token_id = pad;
      }
      // The other mask rule.
      const std::string rule = c.use_bidirectional_attention;
      c.use_bidirectional_attention = v.vision_rule ? "" : "vision";
      expect_moved(moved(forward_reference(*m, s.tokens, s.spans), s),
                   v.vision_rule ? "causal_image_tokens" : "bidirectional_image_tokens");
      c.use_bidirectional_attention = rule;
    }
  }
}

std::string refusal_of(const std::function<void()>& fn) {
  try {
    fn();
  } catch (const Error& e) {
    return e.what();
  }
  return "";
}

// Under the "vision" rule an image cut across steps is refused (its first rows would have
// missed its later ones), wherever the cut falls; a row outside its span, or spans outside the
// sequence or overlapping, are refused on both passes.
TEST(ImagePositions, SplitImagesAndMisplacedSpansAreRefused) {
  const auto m = load_model(image_fixture_dir("tiny-31b-vision") / "hf");
  const ImageSequence s = load_sequence("tiny-31b-vision", "one_image", m->config);
  for (const std::vector<int64_t>& cuts : {std::vector<int64_t>{40}, std::vector<int64_t>{7, 40}, std::vector<int64_t>{70}}) {
    const std::string e = refusal_of([&] { cached(*m, s, {}, cuts); });
    EXPECT_NE(e.find("an image at positions [7, 71)"), std::string::npos) << e;
    EXPECT_NE(e.find("use_bidirectional_attention = \"vision\""), std::string::npos) << e;
  }
  DenseKvStore kv(m->config);
  const int seq = kv.add_sequence();
  std::vector<BatchRow> rows = rows_of(s, seq, 0, 4);
  rows[3].soft = &s.spans[0];  // position 3, span [7, 71)
  EXPECT_NE(refusal_of([&] { forward_cached(*m, rows, kv); }).find("lies outside the soft tokens"), std::string::npos);
  std::vector<SoftSpan> spans = s.spans;
  spans.push_back({s.soft_rows[0].data(), 70, 2, true});
  EXPECT_NE(refusal_of([&] { forward_reference(*m, s.tokens, spans); }).find("overlaps"), std::string::npos);
  spans.back().first_pos = s.T() - 1;
  EXPECT_NE(refusal_of([&] { forward_reference(*m, s.tokens, spans); }).find("outside the sequence"), std::string::npos);
}

}  // namespace
}  // namespace image_positions
}  // namespace g4

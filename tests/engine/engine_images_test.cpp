// Images through the engine: the tower on the engine's kernels, soft tokens at their spans,
// chunked prefill, the prefix cache. The truth is independent of the engine: the fixture's
// float64 logits for the prompt, and for generated tokens the f32 reference pass over the same
// tokens with the fixture's own soft tokens (no tower, no cache, no chunking).
#include <gtest/gtest.h>
#include <nlohmann/json.hpp>

#include <algorithm>

#include "engine/engine.h"
#include "model/forward_reference.h"
#include "platform/error.h"
#include "test_util.h"

namespace g4 {
namespace engine_images_test {

namespace fs = std::filesystem;
using nlohmann::json;

fs::path vision_dir(const std::string& v) { return test::fixtures_dir() / "gemma4-vision-tiny" / v; }

// The tower's input for a fixture image: its valid patches and grid, from the fixture's own
// preprocessing (pixel_values, position_ids), placed at `span`.
std::shared_ptr<PromptImage> fixture_image(const json& manifest, const std::string& name, PromptImageSpan span) {
  const json& im = manifest["images"][name];
  const int64_t n = im["n_patches"], width = int64_t(manifest["vision"]["patch_size"]) * int64_t(manifest["vision"]["patch_size"]) * 3;
  const fs::path images = vision_dir(manifest["variant"]) / "../images";
  auto img = std::make_shared<PromptImage>();
  const auto px = test::read_f32(images / im["pixel_values"]["file"].get<std::string>());
  const auto pos = test::read_i32(images / im["position_ids"]["file"].get<std::string>());
  img->pixel_values.assign(px.begin(), px.begin() + n * width);
  img->positions.assign(pos.begin(), pos.begin() + n * 2);
  img->grid_rows = im["patch_grid_hw"][0];
  img->grid_cols = im["patch_grid_hw"][1];
  img->span = span;
  img->key = image_content_key(*img);
  return img;
}

struct Fixture {
  json manifest;
  std::unique_ptr<Model> model;
  std::unique_ptr<VisionModel> vision;
};

Fixture load(const std::string& v) {
  Fixture f;
  f.manifest = json::parse(test::read_file(vision_dir(v) / "manifest.json"));
  f.model = load_model(vision_dir(v) / "hf");
  f.vision = load_vision_model(vision_dir(v) / "hf");
  return f;
}

// The sequence's prompt and its images (by manifest name), optionally with other images swapped in.
GenerationRequest request(const Fixture& f, const std::string& seq, int max_tokens,
                          const std::vector<std::string>& image_names = {}) {
  const json& s = f.manifest["sequences"][seq];
  GenerationRequest r;
  r.prompt = test::read_i32(vision_dir(f.manifest["variant"]) / "expected" / s["tokens"]["file"].get<std::string>());
  r.sampling.max_tokens = max_tokens;
  r.sampling.temperature = 0;  // greedy: the reference gives the argmax
  for (size_t i = 0; i < s["images"].size(); ++i) {
    const std::string name = image_names.empty() ? s["images"][i].get<std::string>() : image_names[i];
    const auto& p = s["image_token_positions"][i];
    r.images.push_back(fixture_image(f.manifest, name, {p[0].get<int64_t>(), p[1].get<int64_t>()}));
  }
  return r;
}

struct Generated {
  std::vector<int> tokens;
  std::vector<float> logprobs;  // of each token, when the request asks for them
  GenerationEvent last;
};

Generated generate(Engine& e, const GenerationRequest& r) {
  Generated run;
  e.submit(r, [&](const GenerationEvent& ev) {
    for (const auto& t : ev.tokens) {
      run.tokens.push_back(t.token);
      run.logprobs.push_back(t.logprob);
    }
    if (ev.finished) run.last = ev;
  });
  e.run_until_idle();
  EXPECT_NE(run.last.finish_reason, "error") << run.last.error;
  return run;
}

EngineOptions options(const Fixture& f, int threads, int64_t chunk) {
  EngineOptions o;
  o.max_seqs = 2;
  o.threads = threads;
  o.prefill_chunk = chunk;
  o.max_context = 512;
  o.kv.max_total_tokens = 2048;
  o.vision = f.vision.get();
  return o;
}

// Each generated token against the f32 reference over the prompt and the tokens before it, with
// the fixture's soft tokens: equal wherever the reference's top-2 margin leaves no doubt.
void expect_reference_continuation(const Fixture& f, const std::string& seq, const Generated& run) {
  const json& s = f.manifest["sequences"][seq];
  const fs::path exp = vision_dir(f.manifest["variant"]) / "expected";
  std::vector<std::vector<float>> soft;
  std::vector<SoftSpan> spans;
  soft.reserve(s["images"].size());
  for (size_t i = 0; i < s["images"].size(); ++i) {
    soft.push_back(test::read_f32(exp / (s["images"][i].get<std::string>() + ".soft_tokens.f32")));
    spans.push_back({soft.back().data(), s["image_token_positions"][i][0], s["image_token_positions"][i][1], true});
  }
  std::vector<int> tokens = test::read_i32(exp / s["tokens"]["file"].get<std::string>());
  const int64_t V = f.model->config.vocab_size;
  const std::vector<float> logits = forward_reference(*f.model, [&] {
    std::vector<int> all = tokens;
    all.insert(all.end(), run.tokens.begin(), run.tokens.end() - 1);
    return all;
  }(), spans);
  for (size_t g = 0; g < run.tokens.size(); ++g) {
    const float* row = &logits[(tokens.size() - 1 + g) * size_t(V)];
    std::vector<float> sorted(row, row + V);
    std::partial_sort(sorted.begin(), sorted.begin() + 2, sorted.end(), std::greater<float>());
    if (sorted[0] - sorted[1] < 2e-3f) continue;  // a near-tie: either token is right
    EXPECT_EQ(run.tokens[g], int(std::max_element(row, row + V) - row)) << seq << " generated token " << g;
  }
}

class EngineImages : public ::testing::TestWithParam<std::string> {
 protected:
  void SetUp() override {
    if (!fs::exists(vision_dir(GetParam()) / "manifest.json")) GTEST_SKIP() << "no fixtures at " << vision_dir(GetParam());
  }
};

TEST_P(EngineImages, GreedyOutputFollowsTheReferenceOnEveryPathAndChunking) {
  const Fixture f = load(GetParam());
  for (const char* seq : {"two_images", "one_image"}) {
    std::vector<int> first;
    for (int threads : {0, 1})
      for (int64_t chunk : {256, 16, 5}) {
        Engine e(*f.model, options(f, threads, chunk));
        const Generated run = generate(e, request(f, seq, 6));
        ASSERT_EQ(run.tokens.size(), 6u);
        expect_reference_continuation(f, seq, run);
        EXPECT_GT(run.last.image_tokens, 0);
        EXPECT_GT(run.last.vision_seconds, 0);
        // Chunking and the kernels never change a token.
        if (first.empty()) first = run.tokens;
        EXPECT_EQ(run.tokens, first) << seq << " threads " << threads << " chunk " << chunk;
      }
  }
}

TEST_P(EngineImages, ThePrefixCacheReusesAnImageOnlyWhenItIsTheSame) {
  const Fixture f = load(GetParam());
  EngineOptions o = options(f, 1, 32);
  o.prefix_cache_bytes = 64 << 20;
  o.prefix_cache_min_tokens = 4;
  Engine e(*f.model, o);
  const GenerationRequest same = request(f, "two_images", 4);
  const Generated cold = generate(e, same);
  const Generated warm = generate(e, same);
  EXPECT_EQ(warm.tokens, cold.tokens);
  EXPECT_GE(warm.last.cached_tokens, 140);  // everything up to the last prompt token
  EXPECT_EQ(warm.last.vision_seconds, 0);   // the tower did not run again
  // img2 has as many soft tokens as img0 (63) and the same token ids: only its pixels differ.
  const GenerationRequest other = request(f, "two_images", 4, {"img2_small_30x40", "img1_wide_60x150"});
  const Generated swapped = generate(e, other);
  EXPECT_LE(swapped.last.cached_tokens, 5);  // stops where the first image starts
  Engine alone(*f.model, options(f, 1, 32));
  EXPECT_EQ(swapped.tokens, generate(alone, other).tokens);
}

// The encoder cache with the prefix cache off: the same images again skip the tower and give the
// same tokens; an image that only claims another's key (a forged collision) is encoded itself.
TEST_P(EngineImages, TheEncoderCacheServesOnlyTheSameImage) {
  const Fixture f = load(GetParam());
  EngineOptions o = options(f, 1, 32);
  ASSERT_EQ(o.prefix_cache_bytes, 0u);
  ASSERT_GT(o.image_cache_bytes, 0u);  // on by default
  Engine e(*f.model, o);
  // Logprobs too: the tiny models may answer different images with the same greedy tokens.
  const auto with_logprobs = [](GenerationRequest r) {
    r.sampling.logprobs = true;
    return r;
  };
  const GenerationRequest same = with_logprobs(request(f, "two_images", 4));
  const Generated cold = generate(e, same);
  const Generated warm = generate(e, same);
  EXPECT_EQ(cold.last.images_encoded, 2);
  EXPECT_EQ(cold.last.image_cache_hits, 0);
  EXPECT_EQ(warm.tokens, cold.tokens);
  EXPECT_EQ(warm.logprobs, cold.logprobs);
  EXPECT_EQ(warm.last.cached_tokens, 0);
  EXPECT_EQ(warm.last.images_encoded, 0);
  EXPECT_EQ(warm.last.image_cache_hits, 2);
  EXPECT_EQ(warm.last.vision_seconds, 0);
  EXPECT_EQ(warm.last.image_tokens_prefilled, 63 + 65);
  // img2 (63 soft tokens, like img0) given img0's key: compared in full, it misses.
  const GenerationRequest honest = with_logprobs(request(f, "two_images", 4, {"img2_small_30x40", "img1_wide_60x150"}));
  GenerationRequest forged = honest;
  auto img = std::make_shared<PromptImage>(*forged.images[0]);
  img->key = same.images[0]->key;
  forged.images[0] = img;
  const Generated run = generate(e, forged);
  EXPECT_EQ(run.last.images_encoded, 1);  // img2
  EXPECT_EQ(run.last.image_cache_hits, 1);  // img1
  EngineOptions off = o;
  off.image_cache_bytes = 0;
  Engine alone(*f.model, off);
  const Generated truth = generate(alone, honest);
  EXPECT_EQ(truth.last.images_encoded, 2);
  EXPECT_EQ(run.tokens, truth.tokens);
  EXPECT_EQ(run.logprobs, truth.logprobs);
  EXPECT_NE(truth.logprobs, cold.logprobs);  // img2's answer is not img0's (else the check above could not fail)
  // img0 and the forged img2 now share a key in the cache: each still gets its own rows.
  EXPECT_EQ(generate(e, same).logprobs, cold.logprobs);
  EXPECT_EQ(generate(e, forged).logprobs, truth.logprobs);
}

// Two image requests prefilled side by side, in chunks, each equals the same prompt alone.
TEST_P(EngineImages, BatchedImagePromptsEqualEachAlone) {
  const Fixture f = load(GetParam());
  for (int threads : {0, 2}) {
    EngineOptions o = options(f, threads, 16);
    o.image_cache_bytes = 0;  // every run encodes its own images
    std::vector<std::vector<int>> alone;
    for (const char* seq : {"two_images", "one_image"}) {
      Engine e(*f.model, o);
      alone.push_back(generate(e, request(f, seq, 6)).tokens);
    }
    Engine e(*f.model, o);
    std::vector<Generated> runs(2);
    for (int i = 0; i < 2; ++i)
      e.submit(request(f, i == 0 ? "two_images" : "one_image", 6), [&, i](const GenerationEvent& ev) {
        for (const auto& t : ev.tokens) runs[size_t(i)].tokens.push_back(t.token);
        if (ev.finished) runs[size_t(i)].last = ev;
      });
    // Both prompts (about 150 and 80 tokens) take several 16-token chunks, side by side: steps
    // that prefill more than one chunk's worth hold rows of both.
    int both_running = 0;
    for (int64_t before = e.prefilled_tokens(); e.step(); before = e.prefilled_tokens())
      if (e.running() == 2 && e.prefilled_tokens() - before > 16) ++both_running;
    EXPECT_GE(both_running, 2) << "threads " << threads;
    for (int i = 0; i < 2; ++i) {
      EXPECT_NE(runs[size_t(i)].last.finish_reason, "error") << runs[size_t(i)].last.error;
      EXPECT_EQ(runs[size_t(i)].last.images_encoded, i == 0 ? 2 : 1);
      EXPECT_EQ(runs[size_t(i)].tokens, alone[size_t(i)]) << "request " << i << " threads " << threads;
    }
  }
}

TEST_P(EngineImages, MalformedImageRequestsAreRefusedAtSubmit) {
  const Fixture f = load(GetParam());
  Engine e(*f.model, options(f, 0, 256));
  GenerationRequest r = request(f, "one_image", 2);
  auto img = std::make_shared<PromptImage>(*r.images[0]);
  img->span.first += 1;  // off by one: the span now covers <image|>
  r.images[0] = img;
  EXPECT_THROW(e.submit(r, [](const GenerationEvent&) {}), Error);
  GenerationRequest wrong = request(f, "one_image", 2, {"img0_exact_108x84"});  // 63 soft tokens for a 64-token span
  try {
    e.submit(wrong, [](const GenerationEvent&) {});
    FAIL() << "a span of the wrong length was accepted";
  } catch (const Error& err) {
    EXPECT_NE(std::string(err.what()).find("64 tokens but has 63 soft tokens"), std::string::npos) << err.what();
  }
  Engine blind(*f.model, [&] {
    EngineOptions o = options(f, 0, 256);
    o.vision = nullptr;
    return o;
  }());
  EXPECT_THROW(blind.submit(request(f, "one_image", 2), [](const GenerationEvent&) {}), Error);
}

INSTANTIATE_TEST_SUITE_P(Variants, EngineImages, ::testing::Values("tiny-e-vision", "tiny-31b-vision"));

}  // namespace engine_images_test
}  // namespace g4

#include "cli/bench_vision.h"

#include <algorithm>
#include <cstdio>
#include <fstream>
#include <sstream>

#include <nlohmann/json.hpp>

#include "cli/bench_stats.h"
#include "cli/image_args.h"
#include "media/image_decode.h"
#include "media/image_processor.h"
#include "model/vision_projector.h"
#include "platform/device.h"
#include "platform/error.h"

namespace g4::cli {
namespace {

// --image-size WxH: a deterministic image (smooth gradients plus a hashed texture, so the
// resize has detail to filter) made without any file.
media::RgbImage synthetic_image(const std::string& size) {
  int w = 0, h = 0;
  char x = 0;
  std::istringstream in(size);
  if (!(in >> w >> x >> h) || x != 'x' || w < 1 || h < 1 || w > 16384 || h > 16384 || !in.eof())
    throw Error("--image-size '" + size + "': expected WxH, each side in 1..16384 (e.g. 768x768)");
  media::RgbImage img;
  img.width = w;
  img.height = h;
  img.rgb.resize(size_t(w) * size_t(h) * 3);
  for (int yy = 0; yy < h; ++yy)
    for (int xx = 0; xx < w; ++xx)
      for (int c = 0; c < 3; ++c) {
        const uint32_t hash = (uint32_t(xx) * 73856093u) ^ (uint32_t(yy) * 19349663u) ^ (uint32_t(c) * 83492791u);
        const int v = (xx * 255 / w + yy * 255 / h + c * 85 + int(hash % 32)) % 256;
        img.rgb[(size_t(yy) * size_t(w) + size_t(xx)) * 3 + size_t(c)] = uint8_t(v);
      }
  return img;
}

std::string read_bytes(const std::string& file) {
  std::ifstream in(file, std::ios::binary);
  if (!in) throw Error(file + ": cannot open the image");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

// Weight products' multiply-adds of one image: N patches through the patch embedding and Lv
// layers, S pooled rows through the projector (attention's products are not weight products).
double tower_macs(const VisionConfig& c, int64_t text_hidden, int64_t n, int64_t s) {
  const double hv = c.hidden_size, q = double(c.q_width()), kv = double(c.kv_width());
  const double layer = hv * q + 2 * hv * kv + q * hv + 3 * hv * c.intermediate_size;
  return double(n) * (hv * double(c.patch_width()) + c.num_hidden_layers * layer) + double(s) * double(text_hidden) * hv;
}

// The engine's time to first token on <bos> <|image> S x <|image|> <image|> and 8 text tokens.
void time_first_token(const BenchRig& r, EngineOptions o, const PromptImage& img, VisionImageRun& run) {
  const ImageTokenIds ids = image_token_ids(*r.model, nullptr);
  std::vector<int> prompt = {r.model->config.bos_token_id, ids.image};
  for (int t : bench_prompt_tokens(r.model->config, 8)) prompt.push_back(t);
  auto image = std::make_shared<PromptImage>(img);
  image->span = expand_image_placeholders(prompt, ids, {int(run.soft_tokens)})[0];
  image->key = image_content_key(*image);
  o.prefix_cache_bytes = 0;  // cold: the tower runs
  o.image_cache_bytes = 0;   // and is not served from the encoder-output cache
  o.max_seqs = 1;
  o.kv.max_total_tokens = (int64_t(prompt.size()) / 256 + 2) * 256;
  Engine eng(*r.model, o);
  GenerationRequest req;
  req.prompt = prompt;
  req.images = {image};
  req.sampling.temperature = 0;
  req.sampling.max_tokens = 1;
  GenerationEvent last;
  eng.submit(std::move(req), [&](const GenerationEvent& e) {
    if (e.finished) last = e;
  });
  eng.run_until_idle();
  run.ttft_s = last.ttft_seconds;
  run.ttft_vision_s = last.vision_seconds;
  run.ttft_prompt_tokens = last.prompt_tokens;
}

// One image: preprocessing, --repeat encoder runs on `ex` (timed), then the engine's TTFT.
VisionImageRun bench_image(const BenchRig& r, const VisionModel& vm, const blocks::Exec& ex, const EngineOptions& o,
                           const media::RgbImage& rgb, VisionImageRun run) {
  const VisionConfig& vc = vm.config;
  run.width = rgb.width;
  run.height = rgb.height;
  auto t = BenchClock::now();
  const media::ProcessedImage p = media::preprocess_image(rgb, run.budget, {vc.patch_size, vc.pooling_kernel_size});
  run.preprocess_ms = seconds_since(t) * 1e3;
  run.resized_width = p.resized.width;
  run.resized_height = p.resized.height;
  run.patches = p.patches.count();
  run.soft_tokens = p.soft_tokens;
  PromptImage img;
  img.pixel_values = p.patches.pixel_values;
  img.positions = p.patches.positions;
  img.grid_rows = p.patches.patches_y;
  img.grid_cols = p.patches.patches_x;
  const VisionInput in{img.pixel_values, img.positions, img.grid_rows, img.grid_cols};
  run.product_macs = tower_macs(vc, vm.text_hidden, run.patches, run.soft_tokens);
  for (int64_t i = 0; i < r.flags.repeat; ++i) {
    blocks::StepTimes st;
    blocks::Exec timed = ex;
    timed.times = &st;
    t = BenchClock::now();
    const blocks::Vec soft = encode_image(vc, vm.weights, in, timed);
    const double s = seconds_since(t);
    run.encoder.push_back({s * 1e3, st.weight_products_s * 1e3, st.attention_s * 1e3});
    std::fprintf(stderr, "[bench] %s: encoder run %lld/%lld: %.1f ms (%zu values)\n", run.source.c_str(),
                 (long long)i + 1, (long long)r.flags.repeat, s * 1e3, soft.size());
  }
  time_first_token(r, o, img, run);
  return run;
}

}  // namespace

bool wants_vision_bench(const Args& a) { return a.has("--image") || a.has("--image-size"); }

VisionBench run_vision_bench(const Args& a, BenchRig& r, EngineOptions o) {
  const std::unique_ptr<VisionModel> vm = load_vision_for(a, r.model->path, *r.model);
  if (!vm) throw Error("--image: " + r.model->path.string() + " has no vision tower (no vision_config; for a GGUF pass --mmproj)");
  const VisionConfig& vc = vm->config;
  VisionBench out;
  out.tower = vm->path.string() + " (" + vm->format + ")";
  // A context planned for the tower's widest input beside the text model's.
  const ops::MatmulContext mm = ops::make_matmul_context(
      r.pool.get(), host_cpu(), std::max(r.model->config.widest_matmul_input(), vc.widest_matmul_input()), r.compute.bf16,
      r.compute.int8);
  blocks::Exec ex;
  if (!r.flags.reference) ex.matmul = &mm;
  o.vision = vm.get();
  prepare_vision_kernels(vm.get(), o, "[bench]");  // as generate and serve run it
  const DType wdt = vm->weights.layers[0].q_proj.weight->dtype;
  out.executed = r.flags.reference ? std::string("f32 reference loops") : ops::describe_matmul(mm, wdt);
  out.unit = r.flags.reference ? MacUnit::F32Fma : ops::mac_unit_of(mm, wdt);
  if (out.unit == r.peak.unit) {
    out.peak_gops = r.peak.gops;
  } else {
    std::fprintf(stderr, "[bench] measuring the %s peak on %d threads ...\n", mac_unit_name(out.unit), r.flags.threads);
    out.peak_gops = out.unit == MacUnit::F32Fma ? r.fma.all_threads_gflops : measure_mac_peak(out.unit, r.flags.threads).gops;
  }
  const int budget = image_tokens_flag(a, vc);
  for (const std::string& file : a.get_all("--image")) {
    VisionImageRun run;
    run.source = file;
    run.budget = budget;
    const std::string bytes = read_bytes(file);
    auto t = BenchClock::now();
    const media::RgbImage rgb = media::decode_image({reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()});
    run.decode_ms = seconds_since(t) * 1e3;
    out.images.push_back(bench_image(r, *vm, ex, o, rgb, run));
  }
  if (auto size = a.get("--image-size")) {
    VisionImageRun run;
    run.source = "synthetic " + *size;
    run.budget = budget;
    out.images.push_back(bench_image(r, *vm, ex, o, synthetic_image(*size), run));
  }
  return out;
}

void print_vision_bench(const VisionBench& v) {
  std::printf("\nvision tower: %s\n  products: %s; %s peak %.1f GOP/s (this run)\n", v.tower.c_str(), v.executed.c_str(),
              mac_unit_name(v.unit), v.peak_gops);
  for (const VisionImageRun& im : v.images) {
    std::vector<double> totals;
    for (const TokenTimes& t : im.encoder) totals.push_back(t.total_ms);
    const TokenTimes m = median_run(im.encoder);
    const double gops = m.weight_products_ms > 0 ? 2 * im.product_macs / (m.weight_products_ms * 1e6) : 0;
    std::printf("  %s: %dx%d -> %dx%d at budget %d; decode %.1f ms, preprocess %.1f ms\n", im.source.c_str(), im.width,
                im.height, im.resized_width, im.resized_height, im.budget, im.decode_ms, im.preprocess_ms);
    std::printf("    %lld patches -> %lld soft tokens; encoder %.1f ms (runs %s), %.0f patches/s\n", (long long)im.patches,
                (long long)im.soft_tokens, m.total_ms, run_range(totals, 1).c_str(),
                m.total_ms > 0 ? double(im.patches) / (m.total_ms * 1e-3) : 0.0);
    std::printf("    encoder split: weight products %.1f ms (%.1f GFLOP/s, %.0f%% of peak), attention %.1f ms, rest %.1f ms\n",
                m.weight_products_ms, gops, v.peak_gops > 0 ? 100.0 * gops / v.peak_gops : 0.0, m.attention_ms,
                m.rest_ms());
    std::printf("    one-image chat TTFT %.3f s (%lld prompt tokens, tower %.3f s, cold prefix cache)\n", im.ttft_s,
                (long long)im.ttft_prompt_tokens, im.ttft_vision_s);
  }
}

nlohmann::json vision_bench_json(const VisionBench& v) {
  nlohmann::json images = nlohmann::json::array();
  for (const VisionImageRun& im : v.images) {
    nlohmann::json runs = nlohmann::json::array();
    std::vector<double> totals;
    for (const TokenTimes& t : im.encoder) {
      runs.push_back({{"total_ms", t.total_ms}, {"weight_products_ms", t.weight_products_ms},
                      {"attention_ms", t.attention_ms}, {"rest_ms", t.rest_ms()}});
      totals.push_back(t.total_ms);
    }
    const TokenTimes m = median_run(im.encoder);
    const double gops = m.weight_products_ms > 0 ? 2 * im.product_macs / (m.weight_products_ms * 1e6) : 0;
    images.push_back({{"source", im.source},
                      {"width", im.width},
                      {"height", im.height},
                      {"resized_width", im.resized_width},
                      {"resized_height", im.resized_height},
                      {"budget", im.budget},
                      {"decode_ms", im.decode_ms},
                      {"preprocess_ms", im.preprocess_ms},
                      {"patches", im.patches},
                      {"soft_tokens", im.soft_tokens},
                      {"encoder_ms_median", m.total_ms},
                      {"encoder_ms_min", *std::min_element(totals.begin(), totals.end())},
                      {"encoder_ms_max", *std::max_element(totals.begin(), totals.end())},
                      {"encoder_runs", runs},
                      {"patches_per_s", m.total_ms > 0 ? double(im.patches) / (m.total_ms * 1e-3) : 0.0},
                      {"weight_products_ms", m.weight_products_ms},
                      {"attention_ms", m.attention_ms},
                      {"rest_ms", m.rest_ms()},
                      {"product_macs", im.product_macs},
                      {"products_gflop_s", gops},
                      {"products_fraction_of_peak", v.peak_gops > 0 ? gops / v.peak_gops : 0.0},
                      {"ttft_s", im.ttft_s},
                      {"ttft_vision_s", im.ttft_vision_s},
                      {"ttft_prompt_tokens", im.ttft_prompt_tokens}});
  }
  return {{"tower", v.tower},
          {"products_kernel", v.executed},
          {"peak_unit", mac_unit_name(v.unit)},
          {"peak_gops", v.peak_gops},
          {"images", images}};
}

}  // namespace g4::cli

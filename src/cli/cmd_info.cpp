// g4 info: the resolved config, the layer plan, parameter count and bytes by dtype.
#include <cstdio>

#include "cli/args.h"
#include "cli/command.h"
#include "cli/model_arg.h"
#include "cli/device_choice.h"
#include "cli/kernel_checks.h"
#include "gpu/gpu_policy.h"
#include "gpu/shader_tiles.h"
#include "platform/error.h"
#include "engine/kv_cache.h"
#include "model/forward_cached.h"
#include "model/model.h"
#include "ops/amx/attention_bf16_tiles.h"
#include "ops/amx/gemm_q8_tiles.h"
#include "ops/matmul/dot_kernels.h"
#include "ops/matmul/matmul.h"
#include "platform/device.h"
#include "platform/row_interleave.h"
#include "model/weight_interleave.h"
#include "model/weight_placement.h"
#include "platform/dtype_policy.h"

namespace g4::cli {
namespace {

const std::string kUsage = std::string(
    "usage: g4 info --model MODEL [--ctx N] [--device cpu|vulkan[:N]|auto [--compute f32|f16|bf16]]\n\n"
    "Loads and validates the checkpoint, then prints the resolved config, a per-layer table\n"
    "(type, head dim, KV heads, KV source layer, MLP width, MoE), parameter count, bytes by dtype,\n"
    "and the KV cache size per token and per sequence at context N (default 4096) for each KV dtype.\n"
    "A repo id adds a 'source' line: the snapshot files it resolved to, the commit and the cache.\n"
    "Then where --device would run the decoder and why; on a Vulkan device the GPU dtype policy with\n"
    "its reasons and the shaders' tiles against the device's shared memory; --compute resolves it\n"
    "for that request, as generate/serve/logits would (a refusal is printed with its reason).\n") +
    kDeviceHelp + kModelHelp;

std::string human_bytes(uint64_t b) {
  char buf[64];
  if (b >= (1ull << 30)) std::snprintf(buf, sizeof buf, "%.2f GiB", double(b) / double(1ull << 30));
  else if (b >= (1ull << 20)) std::snprintf(buf, sizeof buf, "%.2f MiB", double(b) / double(1ull << 20));
  else std::snprintf(buf, sizeof buf, "%.1f KiB", double(b) / 1024.0);
  return buf;
}

void print_config(const Model& m) {
  const ModelConfig& c = m.config;
  std::printf("model      %s (%s)\n", m.path.string().c_str(), c.model_type.c_str());
  std::printf("geometry   vocab %d, hidden %d, layers %d, heads %d, kv heads %d (full layers: %s)\n", c.vocab_size,
              c.hidden_size, c.num_hidden_layers, c.num_attention_heads, c.num_key_value_heads,
              c.num_global_key_value_heads ? std::to_string(*c.num_global_key_value_heads).c_str() : "same");
  std::printf("heads      head_dim %d (sliding), global_head_dim %d (full); attention scaling 1.0\n", c.head_dim,
              c.global_head_dim);
  std::printf("rope       sliding: %s theta %g; full: %s theta %g, partial_rotary_factor %g\n",
              c.rope_sliding.type == RopeType::Proportional ? "proportional" : "default", c.rope_sliding.theta,
              c.rope_full.type == RopeType::Proportional ? "proportional" : "default", c.rope_full.theta,
              c.rope_full.partial_rotary_factor);
  std::printf("window     sliding_window %d; max_position_embeddings %d\n", c.sliding_window, c.max_position_embeddings);
  std::printf("features   PLE %s; KV-shared layers %d (first %d); K=V %s; double-wide MLP %s; MoE %s\n",
              c.has_ple() ? std::to_string(c.hidden_size_per_layer_input).c_str() : "off", c.num_kv_shared_layers,
              c.first_kv_shared_layer, c.attention_k_eq_v ? "on" : "off", c.use_double_wide_mlp ? "on" : "off",
              c.enable_moe_block ? (std::to_string(c.num_experts) + " experts, top " + std::to_string(c.top_k_experts) +
                                    ", width " + std::to_string(c.moe_intermediate_size)).c_str()
                                 : "off");
  std::printf("softcap    final %s; norm eps %g; tied head %s\n",
              c.final_logit_softcapping ? std::to_string(*c.final_logit_softcapping).c_str() : "none", c.rms_norm_eps,
              c.tie_word_embeddings ? "yes" : "no");
}

void print_layers(const ModelConfig& c) {
  std::printf("\nlayer  type     head_dim  kv_heads  kv_source  mlp_width  moe\n");
  for (size_t i = 0; i < c.layers.size(); ++i) {
    const LayerPlan& p = c.layers[i];
    std::string src = p.kv_shared ? std::to_string(p.kv_source_layer) + " (shared)" : "own";
    if (p.k_eq_v && !p.kv_shared) src += ", K=V";
    std::printf("%5zu  %-7s  %8d  %8d  %-12s %9d  %s\n", i, p.type == LayerType::Full ? "full" : "sliding",
                p.head_dim, p.kv_heads, src.c_str(), p.mlp_width, p.moe ? "yes" : "-");
  }
}

void print_sizes(const Model& m, long long ctx) {
  const ModelConfig& c = m.config;
  const ModelWeights& w = m.weights;
  std::printf("\nweights    prefix '%s', %llu tensors bound, %.3f B parameters, %s loaded (mmap)\n", w.prefix.c_str(),
              (unsigned long long)w.bound_tensors, double(w.parameter_count) / 1e9, human_bytes(w.bound_bytes).c_str());
  for (const auto& [dt, b] : w.bytes_by_dtype) std::printf("           %-5s %s\n", dt.c_str(), human_bytes(b).c_str());
  std::printf("files      %zu (%s), %s of tensor data mapped\n", m.files().size(), m.format.c_str(), human_bytes(m.data_bytes()).c_str());
  std::printf("\nkv cache   per token (all owning layers; shared layers own none) and per sequence at context %lld:\n", ctx);
  for (KvDType t : {KvDType::F32, KvDType::BF16, KvDType::Int8}) {
    const KvFootprint f = kv_footprint(c, t);
    std::printf("           %-5s %s/token (sliding %s + full %s); %s/sequence (sliding capped at window %d)\n",
                kv_dtype_name(t), human_bytes(f.bytes_per_token).c_str(), human_bytes(f.sliding_bytes_per_token).c_str(),
                human_bytes(f.full_bytes_per_token).c_str(), human_bytes(f.bytes_at(ctx, c.sliding_window)).c_str(),
                c.sliding_window);
  }
}

// The weight products' kernel as layer 0's q_proj takes it, in the layout placement gives it:
// matrices copied into memory g4 owns are interleaved for the int8 or bf16 kernels at load
// (model/weight_interleave.h); read through the mapping they stay row-major.
void print_executed_products(const Model& m, const ops::MatmulContext& mm, const PlacementReport& placement) {
  const ModelWeights& w = m.weights;
  // The streamed matrices' dtype (layer 0's q_proj): a K-quant mix keeps the embedding in another.
  const DType streamed = w.layers.empty() ? w.dtype : w.layers[0].q_proj->dtype;
  const bool interleaves = placement.placement == "huge" &&
                           interleaved_for(streamed, {ops::uses_int8_kernel(mm), ops::reads_bf16_interleaved(mm)});
  const ops::TileKernelCheck& tiles = ops::amx_bf16_kernel_check();
  const ops::TileKernelCheck& int8_tiles = ops::amx_int8_kernel_check();
  std::printf("executed   weight products (%s, as layer 0's q_proj): %s;\n"
              "           KV dtype per command (--kv; default the policy's kv above, f32 for the reference\n"
              "           loops); AMX-BF16 tile kernel check: %s (%s); AMX-INT8 tile kernel check: %s (%s)\n",
              std::string(dtype_name(streamed)).c_str(),
              ops::describe_matmul(mm, interleaves ? interleaved_dtype(streamed) : streamed).c_str(),
              kernel_check_status(tiles), tiles.detail.c_str(), kernel_check_status(int8_tiles), int8_tiles.detail.c_str());
}

void print_executed_attention(const ops::MatmulContext& mm) {
  const blocks::Exec ex{&mm};
  std::printf("executed   attention over a bf16 cache: %s;\n"
              "           over an int8 cache: %s;\n"
              "           over an f32 or f16 cache: the stored K/V widened to f32, FMA\n",
              describe_attention(ops::KvElem::BF16, ex).c_str(), describe_attention(ops::KvElem::I8, ex).c_str());
  const ops::TileKernelCheck& attention_tiles = ops::amx_attention_kernel_check();
  std::printf("           AMX-BF16 attention kernel check: %s (%s)\n", kernel_check_status(attention_tiles),
              attention_tiles.detail.c_str());
}

// The device, the dtype policy resolved from it with the reasons, and what this build actually
// runs, so the policy is never mistaken for it.
void print_device_and_execution(Model& m) {
  const ModelWeights& w = m.weights;
  const DeviceInfo& dev = host_cpu();
  const NumFormat fmt = checkpoint_format(w.dtype);
  std::printf("\ndevice\n%s", describe_device(dev).c_str());
  std::printf("kernels    matmul SIMD target %s (runtime dispatch)\n", ops::dot_kernel_target());
  std::printf("\npolicy for %s weights\n%s", std::string(dtype_name(w.dtype)).c_str(),
              describe_policy(resolve_policy(dev, fmt)).c_str());
  const DevicePolicy policy = resolve_policy(dev, fmt);
  const ops::MatmulContext mm = ops::make_matmul_context(nullptr, dev, m.config.widest_matmul_input(),
                                                         policy.compute == NumFormat::BF16, policy.activations == NumFormat::Q8);
  const PlacementReport placement = plan_placement(m, WeightMemory::Auto);
  print_executed_products(m, mm, placement);
  print_executed_attention(mm);
  std::printf("executed   decode weight streams: %s\n", ops::describe_decode_plan(ops::plan_decode_streaming(dev)).c_str());
  std::printf("weights    %s: %d streamed matrices, %.0f MiB (%s); generate/bench/serve --weight-memory\n",
              placement.placement == "huge" ? "copied into 2 MiB huge pages at load" : "read through the mapping",
              placement.tensors, double(placement.bytes) / (1 << 20), placement.reason.c_str());
}

// Where --device would run the decoder and why; on a Vulkan device also the GPU dtype policy
// with its reasons and each shader's planned tile against the device's shared memory.
void print_gpu_choice(const Args& a, const Model& m) {
  const DeviceChoice choice = resolve_device(a);
  std::printf("device     %s\n", choice.reason.c_str());
  if (!choice.vulkan) return;
  try {
    const gpu::GpuPolicy p = gpu::resolve_gpu_policy(choice.info, checkpoint_format(m.weights.dtype), device_compute(a));
    std::printf("gpu policy %s\n           %s\n", p.compute_reason.c_str(), p.weights_reason.c_str());
  } catch (const Error& e) {  // a --compute the device refuses: what generate/serve would refuse with
    std::printf("gpu policy refused: %s\n", e.what());
  }
  try {
    std::printf("gpu tiles  %s\n           %s\n", gpu::plan_matmul_tile(choice.info).text.c_str(),
                gpu::plan_reduction(choice.info).text.c_str());
  } catch (const Error& e) {
    std::printf("gpu tiles  refused: %s\n", e.what());
  }
}

int run(const std::vector<std::string>& argv) {
  Args a(argv, {"--model", "--ctx", "--device", "--compute"}, {});
  if (a.has("--compute") && !a.has("--device")) throw Error("--compute needs --device (it asks the GPU policy)");
  const long long ctx = a.get_int("--ctx", 4096);
  if (ctx < 1) throw Error("--ctx must be >= 1");
  const ModelArg arg = model_arg(a.require("--model"));
  auto m = load_model(arg.path);
  if (arg.cache) std::printf("source     %s\n", arg.cache->describe().c_str());
  print_config(*m);
  print_layers(m->config);
  print_sizes(*m, ctx);
  print_device_and_execution(*m);
  print_gpu_choice(a, *m);
  for (const auto& n : m->config.notes) std::printf("note       %s\n", n.c_str());
  for (const auto& n : m->weights.notes) std::printf("note       %s\n", n.c_str());
  return 0;
}

const Registration reg{"info", "load and validate a checkpoint; print config, layer plan, sizes", kUsage, run};

}  // namespace
}  // namespace g4::cli

// Multiply-add throughput measured by a register-only FMA loop, on one thread and on several
// threads at once. Why: a VM's vCPUs may be hyperthreads of one physical core, or share cores
// with another guest at the moment, and sysfs cannot tell (the hypervisor reports each vCPU as a
// core), and the answer can change from one minute to the next. When they share, compute-bound work (prefill, attention at depth) cannot go faster with the
// second thread while memory-bound decode still does, so `g4 device --fma` and `g4 bench`
// measure it beside the bandwidth, in the same run as the figures it bounds.
#pragma once
#include <string>

namespace g4 {

struct FmaScaling {
  int threads = 0;                  // threads of the second measurement
  double one_thread_gflops = 0;     // 1e9 flops/s (an FMA is 2), best of the passes
  double all_threads_gflops = 0;    // the `threads` together, best of the passes
  const char* isa = "";             // the loop's instructions: "AVX-512", "AVX2+FMA" or "scalar"
  double seconds_total = 0;
};

// Times the loop (pass_seconds per pass, 3 passes each) on 1 thread and on `threads` threads.
// Throws g4::Error when threads < 1 or pass_seconds is not in (0, 10].
FmaScaling measure_fma_scaling(int threads, double pass_seconds = 0.05);

// all / one: how many cores' worth of multiply-adds the threads get (0 when not measured).
double fma_cores_worth(const FmaScaling& s);

// In words, with the arithmetic: whether the threads' FMA work scales with their number, and if
// not (below 0.75x the thread count), that the threads share FMA units and what that means.
std::string describe_fma_scaling(const FmaScaling& s);

// The multiply-add instruction a product's inner loop issues, whose peak bounds prefill: f32 FMA
// (the loop measure_fma_scaling runs), VDPBF16PS (16 lanes x 2 bf16 products: 64 operations per
// instruction), VPDPBUSD (16 lanes x 4 u8·s8 products: 128), AMX's TDPBF16PS (16 x 16 sums of
// 32 bf16 products: 16384) or AMX's TDPBSUD as the Q8_0/Q4_0 tile kernel issues it (16 x 16 sums
// of one block's 32 s8·u8 products: 16384). An operation is a multiply or an add, so a
// multiply-add counts 2, as GFLOP/s counts an FMA.
// The 256-bit int8 tiers (gemm_q8_avx2.h): AVX2's VPMADDUBSW + VPMADDWD + VPADDD step (32
// u8·s8 products and their sums into 8 int32 lanes: 64) and AVX-VNNI's VPDPBUSD (8 lanes x 4: 64).
enum class MacUnit { F32Fma, Bf16Dot, Int8Dot, Bf16Tile, Int8Tile, Int8Madd, Int8Dot256, Int8Sdot };
// "f32 FMA", "VDPBF16PS", "VPDPBUSD", "TDPBF16PS", "TDPBSUD", "VPMADDUBSW+VPMADDWD", "VPDPBUSD (AVX-VNNI)",
// "SDOT" (aarch64)
const char* mac_unit_name(MacUnit u);
// per instruction (step): 32 (AVX-512 FMA: 16 lanes x 2), 64, 128, 16384, 16384, 64, 64, 32
int mac_unit_operations(MacUnit u);

struct MacPeak {
  MacUnit unit = MacUnit::F32Fma;
  int threads = 0;
  double gops = 0;  // 1e9 operations/s on `threads` threads together, best of 3 passes
};

// Times independent chains of `unit` (pass_seconds per pass) on `threads` threads together:
// sixteen for VDPBF16PS and VPDPBUSD, twelve for FMA, four chains of tile products for TDPBF16PS
// and TDPBSUD. Throws g4::Error when threads < 1,
// pass_seconds is not in (0, 10], or the CPU has not confirmed the instruction (probe and
// self-test: AVX512_BF16, AVX512_VNNI, AMX-BF16, AMX-INT8, AVX2, AVX-VNNI); F32Fma runs the
// widest FMA loop the CPU has.
MacPeak measure_mac_peak(MacUnit unit, int threads, double pass_seconds = 0.05);

}  // namespace g4

// g4 bench on a Vulkan device (--device vulkan[:N], or auto on a machine with a GPU): load,
// cold and warm prefill (= time to first token), decode at depth 0 and at --depth, each with the
// share of its wall time the device spent in its dispatches (timestamp queries). The CPU
// figures of g4 bench (products against the MAC peak, decode against a read pass over the host's
// memory) have no device counterpart yet: no GPU read-bandwidth kernel is measured, so no
// roofline ratio is claimed.
#pragma once
#include <string>

#include "cli/args.h"
#include "cli/bench_rig.h"
#include "model/model.h"
#include "model/step_forward.h"

namespace g4::cli {

// The flags the device run honours; any other bench flag given with it is refused by name.
void check_device_bench_flags(const Args& a);

// Prints the table on stdout; returns the exit code.
int run_device_bench(const BenchFlags& f, const Model& m, double load_s, StepForward& device, const std::string& line);

}  // namespace g4::cli

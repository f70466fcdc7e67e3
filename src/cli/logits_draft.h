// `g4 logits --draft-model`: draft logits of an assistant drafter from given starting points,
// written as float32 [starts, k, vocab] (the layout of the shared drafter fixtures).
#pragma once
#include "cli/args.h"

namespace g4::cli {

// Runs the draft mode of g4 logits on the reference loops; returns the exit status.
int run_logits_draft(const Args& a);

}  // namespace g4::cli

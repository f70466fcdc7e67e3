// Runs a piece of code that may execute an instruction this CPU or OS refuses, turning the
// resulting SIGILL into a return value instead of a dead process. Used only around the one-time
// self-tests of optional units (AMX, AVX512_BF16); hot paths never run under it.
#pragma once
#include <functional>

namespace g4 {

// True when body ran to completion; false when it raised SIGILL (the rest of body is skipped).
// body must not own anything with a destructor across the faulting instruction: the jump out of
// the signal handler does not unwind. Calls are serialised; SIGILL raised by other threads while
// the guard is installed is passed on to the handler that was there before.
bool run_catching_sigill(const std::function<void()>& body);

}  // namespace g4

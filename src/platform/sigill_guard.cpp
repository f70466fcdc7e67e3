#include "platform/sigill_guard.h"

#include <csetjmp>
#include <csignal>
#include <mutex>

namespace g4 {
namespace {

std::mutex g_guard_mutex;
struct sigaction g_previous_action;
thread_local sigjmp_buf* t_landing = nullptr;  // set only on the thread inside the guard

extern "C" void on_sigill(int, siginfo_t*, void*) {
  if (t_landing != nullptr) siglongjmp(*t_landing, 1);
  // Not ours: put the previous handler back; the faulting instruction re-executes and gets it.
  sigaction(SIGILL, &g_previous_action, nullptr);
}

}  // namespace

bool run_catching_sigill(const std::function<void()>& body) {
  std::lock_guard<std::mutex> lock(g_guard_mutex);
  struct sigaction action {};
  action.sa_sigaction = on_sigill;
  action.sa_flags = SA_SIGINFO;
  sigemptyset(&action.sa_mask);
  sigaction(SIGILL, &action, &g_previous_action);

  sigjmp_buf landing;
  volatile bool completed = false;
  if (sigsetjmp(landing, /*savemask=*/1) == 0) {  // savemask: unblock SIGILL again after the jump
    t_landing = &landing;
    body();
    completed = true;
  }
  t_landing = nullptr;
  sigaction(SIGILL, &g_previous_action, nullptr);
  return completed;
}

}  // namespace g4

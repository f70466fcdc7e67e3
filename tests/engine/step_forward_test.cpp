// The engine with a StepForward (model/step_forward.h) that fails, as a lost or exhausted device
// does: the failed step's requests finish with reason "error" naming the failure (never a hang
// or a silent stop), step() rethrows so the server can report it, and the engine serves the next
// request exactly as the CPU path does once the device works again.
#include <gtest/gtest.h>

#include "engine/engine.h"
#include "model/forward_cached.h"
#include "platform/error.h"
#include "test_util.h"

namespace g4 {
namespace {

// forward_cached on this CPU, except for the steps told to fail.
class FlakyDevice final : public StepForward {
 public:
  explicit FlakyDevice(const Model& m) : m_(m) {}
  void forward(const std::vector<BatchRow>& rows, KvStore& kv, std::vector<float>& logits,
               std::vector<float>* hidden) override {
    if (fail_next_ > 0) {
      --fail_next_;
      throw Error("vkQueueSubmit: VK_ERROR_DEVICE_LOST");
    }
    forward_cached(m_, rows, kv, {}, logits, hidden);
  }
  void attach(const KvStore&) override {}
  std::string name() const override { return "flaky"; }
  int fail_next_ = 0;

 private:
  const Model& m_;
};

struct Result {
  std::vector<int> tokens;
  std::string finish, error;
};

TEST(EngineOnADevice, AFailedStepEndsItsRequestsWithTheErrorAndTheEngineGoesOn) {
  auto model = load_model(test::fixtures_dir() / "gemma4-tiny" / "tiny-e" / "hf");
  FlakyDevice device(*model);
  EngineOptions o;
  o.device = &device;
  Engine eng(*model, o);
  GenerationRequest r;
  r.prompt = {2, 40, 41, 42, 43};
  r.sampling.max_tokens = 6;
  auto submit = [&](Result& out) {
    eng.submit(r, [&out](const GenerationEvent& e) {
      for (const auto& t : e.tokens) out.tokens.push_back(t.token);
      if (e.finished) out.finish = e.finish_reason, out.error = e.error;
    });
  };
  Result a, b;
  submit(a), submit(b);
  ASSERT_TRUE(eng.step());  // both prompts prefilled, first tokens sampled
  device.fail_next_ = 1;
  EXPECT_THROW(eng.step(), Error);
  EXPECT_EQ(a.finish, "error");
  EXPECT_EQ(b.finish, "error");
  EXPECT_NE(a.error.find("VK_ERROR_DEVICE_LOST"), std::string::npos) << a.error;
  EXPECT_EQ(a.tokens.size(), 1u);
  EXPECT_EQ(eng.running(), 0);

  Result c;
  submit(c);
  eng.run_until_idle();
  EngineOptions cpu;
  Engine reference(*model, cpu);
  Result want;
  reference.submit(r, [&want](const GenerationEvent& e) {
    for (const auto& t : e.tokens) want.tokens.push_back(t.token);
    if (e.finished) want.finish = e.finish_reason;
  });
  reference.run_until_idle();
  EXPECT_EQ(c.finish, want.finish);
  EXPECT_EQ(c.tokens, want.tokens);
}

}  // namespace
}  // namespace g4

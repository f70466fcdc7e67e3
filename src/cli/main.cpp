// g4: Gemma 4 inference engine. One binary, subcommands registered by cmd_*.cpp.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <string>
#include <vector>

#include "cli/command.h"
#include "platform/error.h"
#include "platform/heap_tuning.h"

namespace g4::cli {

std::vector<Command>& registry() {
  static std::vector<Command> commands;
  return commands;
}

Registration::Registration(std::string name, std::string summary, std::string usage,
                           std::function<int(const std::vector<std::string>&)> run) {
  registry().push_back({std::move(name), std::move(summary), std::move(usage), std::move(run)});
}

}  // namespace g4::cli

static void print_help() {
  auto cmds = g4::cli::registry();
  std::sort(cmds.begin(), cmds.end(), [](auto& a, auto& b) { return a.name < b.name; });
  std::printf(
      "g4: a Gemma 4 inference engine\n\n"
      "usage: g4 COMMAND [options]      (g4 COMMAND --help for a command's options)\n\n"
      "commands:\n");
  for (const auto& c : cmds) std::printf("  %-10s %s\n", c.name.c_str(), c.summary.c_str());
  std::printf(
      "\n--model takes a model directory, a .gguf file, or a Hugging Face repo id org/name[:REV|:QUANT]\n"
      "found in the local Hugging Face cache (nothing is downloaded; g4 info --help has the details).\n");
}

int main(int argc, char** argv) {
  g4::keep_large_blocks_in_heap();  // activation buffers reused across steps (platform/heap_tuning.h)
  std::vector<std::string> args(argv + 1, argv + argc);
  if (args.empty() || args[0] == "--help" || args[0] == "-h" || args[0] == "help") {
    print_help();
    return args.empty() ? 2 : 0;
  }
  if (args[0] == "--version") {
    std::printf("g4 0.1.0\n");
    return 0;
  }
  for (const auto& c : g4::cli::registry()) {
    if (c.name != args[0]) continue;
    std::vector<std::string> rest(args.begin() + 1, args.end());
    if (std::find(rest.begin(), rest.end(), "--help") != rest.end() ||
        std::find(rest.begin(), rest.end(), "-h") != rest.end()) {
      std::printf("%s\n", c.usage.c_str());
      return 0;
    }
    try {
      return c.run(rest);
    } catch (const g4::Error& e) {
      std::fprintf(stderr, "g4 %s: error: %s\n", c.name.c_str(), e.what());
      return 1;
    } catch (const std::exception& e) {
      std::fprintf(stderr, "g4 %s: internal error: %s\n", c.name.c_str(), e.what());
      return 3;
    }
  }
  std::fprintf(stderr, "g4: unknown command '%s' (g4 --help lists them)\n", args[0].c_str());
  return 2;
}

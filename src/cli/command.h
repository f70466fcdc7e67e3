// Subcommand registry for the single `g4` binary. Each cmd_*.cpp registers itself:
//   static const g4::cli::Registration reg{"info", "one-line summary", usage_text, run_info};
#pragma once
#include <functional>
#include <string>
#include <vector>

namespace g4::cli {

struct Command {
  std::string name;
  std::string summary;  // one line for `g4 --help`
  std::string usage;    // full text for `g4 NAME --help`
  std::function<int(const std::vector<std::string>& args)> run;
};

std::vector<Command>& registry();

struct Registration {
  Registration(std::string name, std::string summary, std::string usage,
               std::function<int(const std::vector<std::string>&)> run);
};

}  // namespace g4::cli

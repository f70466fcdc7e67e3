#include "cli/model_arg.h"

#include <cstdio>

namespace g4::cli {

ModelArg model_arg(const std::string& arg) {
  ModelArg m;
  m.cache = resolve_model_name(arg);
  m.path = m.cache ? m.cache->path : std::filesystem::path(arg);
  if (m.cache) std::fprintf(stderr, "[g4] model %s\n", m.cache->describe().c_str());
  return m;
}

}  // namespace g4::cli

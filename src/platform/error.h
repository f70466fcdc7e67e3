// g4::Error: the one exception type for bad input and refused operations.
// Thrown at load / validation time with full context (file, tensor, field, offset);
// hot loops never throw. Frontends catch it and print what() as one clear message.
#pragma once
#include <stdexcept>
#include <string>

namespace g4 {

class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

}  // namespace g4

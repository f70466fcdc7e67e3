// Minimal `--flag value` / `--switch` parser with errors that name the bad argument.
#pragma once
#include <map>
#include <optional>
#include <set>
#include <string>
#include <vector>

namespace g4::cli {

class Args {
 public:
  // value_flags take one value ("--model DIR" or "--model=DIR"); switches take none.
  // Unknown flags, missing values and stray positionals (beyond max_positional) throw g4::Error.
  Args(const std::vector<std::string>& argv, std::set<std::string> value_flags,
       std::set<std::string> switches, size_t max_positional = 0);

  bool has(const std::string& flag) const;
  std::optional<std::string> get(const std::string& flag) const;
  // Every value of a repeatable flag (--image A --image B), in order.
  std::vector<std::string> get_all(const std::string& flag) const;
  std::string require(const std::string& flag) const;
  std::string get_or(const std::string& flag, const std::string& fallback) const;
  long long get_int(const std::string& flag, long long fallback) const;
  double get_double(const std::string& flag, double fallback) const;
  const std::vector<std::string>& positional() const { return positional_; }

 private:
  std::map<std::string, std::string> values_;
  std::map<std::string, std::vector<std::string>> all_values_;
  std::set<std::string> switches_on_;
  std::vector<std::string> positional_;
};

// "5,17,3" -> {5,17,3}; throws naming the bad element.
std::vector<int> parse_int_list(const std::string& text, const std::string& what);

}  // namespace g4::cli

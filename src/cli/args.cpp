#include "cli/args.h"

#include <charconv>

#include "platform/error.h"

namespace g4::cli {

Args::Args(const std::vector<std::string>& argv, std::set<std::string> value_flags,
           std::set<std::string> switches, size_t max_positional) {
  for (size_t i = 0; i < argv.size(); ++i) {
    const std::string& a = argv[i];
    if (a.rfind("--", 0) == 0 || (a.size() == 2 && a[0] == '-' && a[1] != '-')) {
      std::string flag = a, value;
      bool inline_value = false;
      if (auto eq = a.find('='); eq != std::string::npos) {
        flag = a.substr(0, eq);
        value = a.substr(eq + 1);
        inline_value = true;
      }
      if (value_flags.count(flag)) {
        if (!inline_value) {
          if (i + 1 >= argv.size()) throw Error("option " + flag + " needs a value");
          value = argv[++i];
        }
        values_[flag] = value;  // the last one wins for get(); all_values_ keeps every one
        all_values_[flag].push_back(value);
      } else if (switches.count(flag) && !inline_value) {
        switches_on_.insert(flag);
      } else {
        throw Error("unknown option " + a + " (see --help)");
      }
    } else {
      if (positional_.size() >= max_positional) throw Error("unexpected argument '" + a + "' (see --help)");
      positional_.push_back(a);
    }
  }
}

bool Args::has(const std::string& flag) const { return values_.count(flag) || switches_on_.count(flag); }

std::optional<std::string> Args::get(const std::string& flag) const {
  auto it = values_.find(flag);
  if (it == values_.end()) return std::nullopt;
  return it->second;
}

std::vector<std::string> Args::get_all(const std::string& flag) const {
  auto it = all_values_.find(flag);
  return it == all_values_.end() ? std::vector<std::string>{} : it->second;
}

std::string Args::require(const std::string& flag) const {
  auto v = get(flag);
  if (!v) throw Error("missing required option " + flag + " (see --help)");
  return *v;
}

std::string Args::get_or(const std::string& flag, const std::string& fallback) const {
  auto v = get(flag);
  return v ? *v : fallback;
}

long long Args::get_int(const std::string& flag, long long fallback) const {
  auto v = get(flag);
  if (!v) return fallback;
  long long out = 0;
  auto [p, ec] = std::from_chars(v->data(), v->data() + v->size(), out);
  if (ec != std::errc() || p != v->data() + v->size())
    throw Error("option " + flag + ": '" + *v + "' is not an integer");
  return out;
}

double Args::get_double(const std::string& flag, double fallback) const {
  auto v = get(flag);
  if (!v) return fallback;
  try {
    size_t used = 0;
    double d = std::stod(*v, &used);
    if (used != v->size()) throw std::invalid_argument("trailing");
    return d;
  } catch (const std::exception&) {
    throw Error("option " + flag + ": '" + *v + "' is not a number");
  }
}

std::vector<int> parse_int_list(const std::string& text, const std::string& what) {
  std::vector<int> out;
  size_t start = 0;
  while (start <= text.size()) {
    size_t end = text.find(',', start);
    if (end == std::string::npos) end = text.size();
    std::string item = text.substr(start, end - start);
    while (!item.empty() && item.front() == ' ') item.erase(item.begin());
    while (!item.empty() && item.back() == ' ') item.pop_back();
    int v = 0;
    auto [p, ec] = std::from_chars(item.data(), item.data() + item.size(), v);
    if (item.empty() || ec != std::errc() || p != item.data() + item.size())
      throw Error(what + ": '" + item + "' is not an integer");
    out.push_back(v);
    start = end + 1;
  }
  return out;
}

}  // namespace g4::cli

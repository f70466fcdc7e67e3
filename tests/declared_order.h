// A JSON schema that declares its properties out of sorted order everywhere ("zname" before
// "adult" with an optional "bonus" between them, a $ref'd object, an anyOf object branch, a nested
// object), and the check that a generated value lists every object's members in that declared
// order. A grammar built from a sorted copy of the schema fails the check at the top level, so it
// catches an order lost anywhere between the schema's text and the sampled tokens. Shared by the
// grammar test (tests/engine) and the server test (tests/server).
#pragma once
#include <nlohmann/json.hpp>

#include <string>
#include <vector>

namespace g4::test {

inline constexpr const char* kDeclaredOrderSchema = R"({"type":"object",
  "properties":{"zname":{"type":"string","maxLength":4},"bonus":{"type":"integer"},"adult":{"type":"boolean"},
    "mid":{"$ref":"#/$defs/point"},
    "choice":{"anyOf":[{"type":"object","properties":{"y":{"type":"integer"},"x":{"type":"integer"}},"required":["y","x"]},
                       {"type":"null"}]},
    "nested":{"type":"object","properties":{"c":{"type":"boolean"},"b":{"type":"null"},"a":{"type":"integer"}},
              "required":["c","b","a"]}},
  "required":["zname","adult","mid","choice","nested"],"additionalProperties":false,
  "$defs":{"point":{"type":"object","properties":{"z":{"type":"integer"},"k":{"type":"integer"}},"required":["z","k"]}}})";

inline std::vector<std::string> keys_of(const nlohmann::ordered_json& o) {
  std::vector<std::string> k;
  if (o.is_object())
    for (auto it = o.begin(); it != o.end(); ++it) k.push_back(it.key());
  return k;
}

// "" when `v`, a value of kDeclaredOrderSchema, has every object's members in declared order;
// else which object is out of order. *object_choice: whether anyOf's object branch was taken.
inline std::string declared_order_mismatch(const nlohmann::ordered_json& v, bool* object_choice = nullptr) {
  auto check = [](const nlohmann::ordered_json& o, const std::vector<std::string>& want, const std::string& where) {
    if (keys_of(o) == want) return std::string();
    std::string w;
    for (const auto& k : want) w += (w.empty() ? "" : ",") + k;
    return where + " is " + o.dump() + ", members not in the declared order " + w;
  };
  if (!v.is_object()) return "not an object: " + v.dump();
  std::vector<std::string> top = {"zname", "bonus", "adult", "mid", "choice", "nested"};
  if (!v.contains("bonus")) top.erase(top.begin() + 1);  // optional: absent, or in its declared place
  std::string e = check(v, top, "the value");
  if (e.empty()) e = check(v["mid"], {"z", "k"}, "mid");
  if (e.empty()) e = check(v["nested"], {"c", "b", "a"}, "nested");
  if (object_choice) *object_choice = v["choice"].is_object();
  if (e.empty() && v["choice"].is_object()) e = check(v["choice"], {"y", "x"}, "choice");
  return e;
}

}  // namespace g4::test

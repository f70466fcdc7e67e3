// `g4 generate --json-schema / --json-object / --grammar`: sampled output follows the constraint
// (a schema's properties in the order the file declares them), and a schema or grammar g4 cannot
// honour is an error naming the file and what is wrong.
#include <gtest/gtest.h>

#include <nlohmann/json.hpp>

#include <string>

#include "test_util.h"

namespace g4 {
namespace {

// stdout alone (the generated text and a final newline); stderr is dropped.
int generate(const std::string& args, std::string* out) {
  return test::run_command("{ " + test::g4_binary().string() + " " + args + " 2>/dev/null; }", out);
}
std::string first_line(const std::string& out) { return out.substr(0, out.rfind('\n')); }

TEST(GenerateGrammar, OutputFollowsTheConstraintOrTheErrorNamesIt) {
  test::TempDir dir;
  const std::string model = (dir.path() / "m").string();
  std::string out;
  ASSERT_EQ(0, test::g4_command("synth --preset tiny-e --out " + model, &out)) << out;
  test::write_file(dir.path() / "s.json",
                   R"({"type":"object","properties":{"zid":{"type":"integer"},"ok":{"type":"boolean"}},"required":["zid","ok"]})");
  test::write_file(dir.path() / "g.gbnf", "root ::= \"x\" [0-9]{3} \"y\"\n");
  test::write_file(dir.path() / "bad.json", R"({"type":"string","pattern":"^a"})");
  test::write_file(dir.path() / "bad.gbnf", "root ::= missing\n");
  const std::string gen = "generate --model " + model + " --prompt hi --temperature 1 -n 200 --threads 1 ";
  for (int seed = 0; seed < 3; ++seed) {
    ASSERT_EQ(0, generate(gen + "--seed " + std::to_string(seed) + " --json-schema " + (dir.path() / "s.json").string(),
                                  &out))
        << out;
    const auto v = nlohmann::ordered_json::parse(first_line(out));
    EXPECT_TRUE(v["zid"].is_number_integer() && v["ok"].is_boolean()) << out;
    EXPECT_EQ(v.begin().key(), "zid") << out;  // declared first, sorted last
    ASSERT_EQ(0, generate(gen + "--seed " + std::to_string(seed) + " --grammar " + (dir.path() / "g.gbnf").string(),
                                  &out))
        << out;
    const std::string line = first_line(out);
    ASSERT_EQ(line.size(), 5u) << out;
    EXPECT_TRUE(line[0] == 'x' && line[4] == 'y' && std::isdigit(uint8_t(line[1])) && std::isdigit(uint8_t(line[3]))) << out;
  }
  EXPECT_NE(0, test::g4_command(gen + "--json-schema " + (dir.path() / "bad.json").string(), &out));
  EXPECT_NE(out.find("bad.json: schema keyword 'pattern'"), std::string::npos) << out;
  EXPECT_NE(0, test::g4_command(gen + "--grammar " + (dir.path() / "bad.gbnf").string(), &out));
  EXPECT_NE(out.find("rule 'missing' is used but never defined"), std::string::npos) << out;
}

}  // namespace
}  // namespace g4

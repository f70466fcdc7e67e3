// Image content parts: chat image_url and Responses input_image, detail budgets, data: URLs.
// Every refusal names the part's field.
#include <gtest/gtest.h>

#include "server/image_parts.h"
#include "server/openai_request.h"

namespace g4::server {
namespace {

using nlohmann::json;

// "hello" as PNG-less bytes: the parser does not look inside.
const std::string kHelloUrl = "data:image/png;base64,aGVsbG8=";

RequestLimits limits(bool images) {
  RequestLimits l;
  l.model_name = "tiny";
  l.vocab_size = 1000;
  l.max_context = 512;
  l.accepts_images = images;
  return l;
}

json chat_with(json parts, const std::string& role = "user") {
  return {{"model", "tiny"}, {"messages", {{{"role", role}, {"content", parts}}}}};
}

TEST(ImageParts, ChatPartsAreCollectedInOrderWithTheirDetailBudgets) {
  const json parts = {{{"type", "text"}, {"text", "compare"}},
                      {{"type", "image_url"}, {"image_url", {{"url", kHelloUrl}, {"detail", "low"}}}},
                      {{"type", "image_url"}, {"image_url", "https://example.com/a.png"}},
                      {{"type", "image_url"}, {"image_url", {{"url", kHelloUrl}, {"detail", "high"}}}}};
  auto r = parse_chat_request(chat_with(parts), limits(true));
  ASSERT_TRUE(std::holds_alternative<GenerationSpec>(r)) << std::get<ApiError>(r).message;
  const auto& s = std::get<GenerationSpec>(r);
  ASSERT_EQ(s.images.size(), 3u);
  EXPECT_EQ(s.images[0].where, "messages[0].content[1]");
  EXPECT_EQ(s.images[0].budget, 70);
  EXPECT_EQ(s.images[1].url, "https://example.com/a.png");
  EXPECT_EQ(s.images[1].budget, 0);
  EXPECT_EQ(s.images[2].budget, 1120);
}

TEST(ImageParts, RefusalsNameTheField) {
  const auto error = [](const json& body, bool images = true) {
    auto r = parse_chat_request(body, limits(images));
    EXPECT_TRUE(std::holds_alternative<ApiError>(r)) << body.dump();
    return std::holds_alternative<ApiError>(r) ? std::get<ApiError>(r) : ApiError{};
  };
  const json ok_part = {{"type", "image_url"}, {"image_url", {{"url", kHelloUrl}}}};
  // A model without a vision tower refuses the part rather than answering without seeing it.
  EXPECT_EQ(error(chat_with({ok_part}), false).param, "messages[0].content[0].type");
  EXPECT_NE(error(chat_with({ok_part}), false).message.find("no vision tower"), std::string::npos);
  EXPECT_EQ(error(chat_with({ok_part}, "system")).param, "messages[0].content[0].type");
  EXPECT_EQ(error(chat_with({{{"type", "image_url"}, {"image_url", {{"url", kHelloUrl}, {"detail", "max"}}}}})).param,
            "messages[0].content[0].image_url.detail");
  EXPECT_EQ(error(chat_with({{{"type", "image_url"}, {"image_url", {{"url", kHelloUrl}, {"crop", 1}}}}})).param,
            "messages[0].content[0].image_url.crop");
  EXPECT_EQ(error(chat_with({{{"type", "image_url"}, {"image_url", {{"detail", "low"}}}}})).param,
            "messages[0].content[0].image_url.url");
  EXPECT_EQ(error(chat_with({{{"type", "image_url"}, {"image_url", 7}}})).param, "messages[0].content[0].image_url");
  EXPECT_EQ(error(chat_with({{{"type", "image_url"}, {"image_url", {{"url", ""}}}}})).param,
            "messages[0].content[0].image_url.url");
  EXPECT_EQ(error(chat_with({{{"type", "image_url"}, {"image_url", {{"url", kHelloUrl}}}, {"extra", 1}}})).param,
            "messages[0].content[0].extra");
  EXPECT_EQ(error(chat_with({{{"type", "input_audio"}, {"input_audio", json::object()}}})).param,
            "messages[0].content[0].type");
}

TEST(ImageParts, ResponsesInputImageParts) {
  ImagePart p = std::get<ImagePart>(
      read_input_image_part({{"type", "input_image"}, {"image_url", kHelloUrl}, {"detail", "low"}}, "input[0].content[1]"));
  EXPECT_EQ(p.url, kHelloUrl);
  EXPECT_EQ(p.budget, 70);
  const auto param = [](const json& part) {
    auto r = read_input_image_part(part, "input[0].content[0]");
    return std::holds_alternative<ApiError>(r) ? std::get<ApiError>(r).param : "(accepted)";
  };
  EXPECT_EQ(param({{"type", "input_image"}, {"file_id", "file-1"}}), "input[0].content[0].file_id");
  EXPECT_EQ(param({{"type", "input_image"}}), "input[0].content[0].image_url");
  EXPECT_EQ(param({{"type", "input_image"}, {"image_url", kHelloUrl}, {"detail", 2}}), "input[0].content[0].detail");
  EXPECT_EQ(param({{"type", "input_image"}, {"image_url", kHelloUrl}, {"zoom", 2}}), "input[0].content[0].zoom");
}

TEST(ImageParts, DataUrls) {
  auto d = parse_data_url(kHelloUrl, "messages[0].content[0]");
  ASSERT_TRUE(std::holds_alternative<DataUrl>(d));
  EXPECT_EQ(std::get<DataUrl>(d).bytes, "hello");
  EXPECT_EQ(std::get<DataUrl>(d).media_type, "image/png");
  const auto message = [](const std::string& url) {
    auto r = parse_data_url(url, "messages[0].content[0]");
    if (!std::holds_alternative<ApiError>(r)) return std::string("(accepted)");
    EXPECT_EQ(std::get<ApiError>(r).param, "messages[0].content[0].url");
    return std::get<ApiError>(r).message;
  };
  EXPECT_NE(message("data:text/plain;base64,aGVsbG8=").find("text/plain"), std::string::npos);
  EXPECT_NE(message("data:image/png,hello").find("only base64"), std::string::npos);
  EXPECT_NE(message("data:image/png;base64").find("','"), std::string::npos);
  // The offset of the bad character, and where the data starts in the URL.
  const std::string bad = message("data:image/png;base64,aGV*bG8=");
  EXPECT_NE(bad.find("'*' at offset 3"), std::string::npos) << bad;
  EXPECT_NE(bad.find("starts at offset 22"), std::string::npos) << bad;
  EXPECT_NE(message("data:image/png;base64,").find("no bytes"), std::string::npos);
}

}  // namespace
}  // namespace g4::server

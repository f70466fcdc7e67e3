// Sends an image to a running `g4 serve` (a vision model) with the official OpenAI Node.js
// client: a chat image_url part with a data: URL, and a Responses input_image part. Started by
// tests/server/server_images_test.cpp (OpenAiNodeClientSendsAnImage) with G4_BASE_URL, G4_MODEL,
// G4_IMAGE (a PNG file) and G4_IMAGE_TOKENS (its soft-token count at the server's budget).
import assert from "node:assert/strict";
import { readFileSync } from "node:fs";
import OpenAI from "openai";

const baseURL = process.env.G4_BASE_URL;
const model = process.env.G4_MODEL;
const imageFile = process.env.G4_IMAGE;
const imageTokens = Number(process.env.G4_IMAGE_TOKENS);
assert.ok(baseURL && model && imageFile && imageTokens > 0, "set G4_BASE_URL, G4_MODEL, G4_IMAGE and G4_IMAGE_TOKENS");
const client = new OpenAI({ baseURL, apiKey: process.env.G4_API_KEY ?? "none", maxRetries: 0, timeout: 120_000 });
const url = "data:image/png;base64," + readFileSync(imageFile).toString("base64");

async function main() {
  const chat = await client.chat.completions.create({
    model,
    max_tokens: 6,
    temperature: 0,
    messages: [{ role: "user", content: [{ type: "image_url", image_url: { url } }, { type: "text", text: "what is it" }] }],
  });
  const answer = chat.choices[0].message.content;
  assert.equal(typeof answer, "string");
  assert.ok(answer.length > 0, "a non-empty answer");
  assert.equal(chat.usage.prompt_tokens_details.image_tokens, imageTokens);
  console.log("chat image ok:", JSON.stringify(answer), "image tokens", chat.usage.prompt_tokens_details.image_tokens);

  if (typeof client.responses?.create === "function") {
    const resp = await client.responses.create({
      model,
      max_output_tokens: 6,
      temperature: 0,
      store: false,
      input: [{ role: "user", content: [{ type: "input_image", image_url: url, detail: "auto" }, { type: "input_text", text: "what is it" }] }],
    });
    assert.equal(resp.output_text, answer, "Responses gives the chat's answer for the same image and text");
    assert.equal(resp.usage.input_tokens_details.image_tokens, imageTokens);
    console.log("responses image ok:", JSON.stringify(resp.output_text));
  } else {
    console.log("responses skipped: this client has no responses.create");
  }
  console.log("all OpenAI image checks passed");
}

main().catch((e) => {
  console.error(e);
  process.exit(1);
});

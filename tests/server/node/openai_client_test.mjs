// Drives a running `g4 serve` with the official OpenAI Node.js client. Started by
// tests/server/server_e2e_test.cpp (OpenAiNodeClient) with G4_BASE_URL, G4_API_KEY and G4_MODEL.
import assert from "node:assert/strict";
import OpenAI from "openai";

const baseURL = process.env.G4_BASE_URL;
const apiKey = process.env.G4_API_KEY ?? "none";
const model = process.env.G4_MODEL;
assert.ok(baseURL && model, "set G4_BASE_URL and G4_MODEL");
const client = new OpenAI({ baseURL, apiKey, maxRetries: 0, timeout: 120_000 });
const messages = [{ role: "user", content: "Write a haiku about the sea." }];
const tools = [
  {
    type: "function",
    function: {
      name: "get_weather",
      description: "Current weather for a city",
      parameters: { type: "object", properties: { city: { type: "string" } }, required: ["city"] },
    },
  },
];

// Arguments are a JSON string; a call max_tokens cut short ("length") has the partial one.
function checkToolCalls(calls, finish) {
  for (const call of calls ?? []) {
    assert.equal(call.type, "function");
    assert.equal(typeof call.function.name, "string");
    if (finish === "length") assert.equal(typeof call.function.arguments, "string");
    else JSON.parse(call.function.arguments);
  }
}

async function main() {
  // /v1/models
  const models = await client.models.list();
  const entry = models.data.find((m) => m.id === model);
  assert.ok(entry, `model ${model} listed`);
  assert.ok(entry.g4?.dtype_policy, "g4 block with the dtype policy");

  // chat, no stream
  const chat = await client.chat.completions.create({ model, messages, max_tokens: 16, temperature: 0 });
  assert.equal(chat.object, "chat.completion");
  assert.equal(typeof chat.choices[0].message.content, "string");
  assert.ok(["stop", "length"].includes(chat.choices[0].finish_reason));
  assert.ok(chat.usage.completion_tokens > 0 && chat.usage.prompt_tokens > 0);
  assert.ok(chat.g4.degeneracy.kind, "g4.degeneracy in the response");
  console.log("chat ok:", JSON.stringify(chat.choices[0].message.content).slice(0, 80), "verdict", chat.g4.degeneracy.kind);

  // chat, stream with usage
  const stream = await client.chat.completions.create({
    model, messages, max_tokens: 24, stream: true, stream_options: { include_usage: true },
  });
  let text = "", chunks = 0, finish = null, usage = null, g4 = null;
  for await (const chunk of stream) {
    chunks++;
    if (chunk.choices.length > 0) {
      text += chunk.choices[0].delta?.content ?? "";
      finish = chunk.choices[0].finish_reason ?? finish;
    }
    if (chunk.usage) usage = chunk.usage;
    if (chunk.g4) g4 = chunk.g4;
  }
  assert.ok(chunks >= 2, "several chunks");
  assert.ok(["stop", "length"].includes(finish), `finish_reason ${finish}`);
  assert.ok(usage && usage.completion_tokens > 0, "usage chunk");
  assert.ok(g4?.degeneracy?.kind, "g4 in the last chunk");
  console.log("stream ok:", chunks, "chunks,", usage.completion_tokens, "tokens");

  // the stream helper accumulates the same way
  const runner = client.beta.chat.completions.stream({ model, messages, max_tokens: 12 });
  const final = await runner.finalChatCompletion();
  assert.equal(typeof final.choices[0].message.content, "string");

  // tools: the request is accepted, the declarations reach the template, the reply is well formed
  const plain = await client.chat.completions.create({ model, messages, max_tokens: 4 });
  const withTools = await client.chat.completions.create({ model, messages, tools, tool_choice: "auto", max_tokens: 24 });
  assert.ok(withTools.usage.prompt_tokens > plain.usage.prompt_tokens, "tool declarations are in the prompt");
  assert.ok(["stop", "length", "tool_calls"].includes(withTools.choices[0].finish_reason));
  checkToolCalls(withTools.choices[0].message.tool_calls, withTools.choices[0].finish_reason);
  const named = await client.chat.completions.create({
    model, messages, tools, tool_choice: { type: "function", function: { name: "get_weather" } }, max_tokens: 8,
  });
  checkToolCalls(named.choices[0].message.tool_calls, named.choices[0].finish_reason);
  const toolStream = await client.chat.completions.create({ model, messages, tools, max_tokens: 16, stream: true });
  const toolChunks = [];
  for await (const chunk of toolStream) toolChunks.push(chunk);
  const toolFinish = toolChunks.map((c) => c.choices[0]?.finish_reason).find((f) => f);
  for (const chunk of toolChunks) checkToolCalls(chunk.choices[0]?.delta?.tool_calls?.map((c) => ({ type: "function", ...c })), toolFinish);
  // a conversation with an earlier tool call and its result renders and runs
  const followUp = await client.chat.completions.create({
    model, tools, max_tokens: 8,
    messages: [
      { role: "user", content: "Weather in Paris?" },
      { role: "assistant", content: null, tool_calls: [{ id: "call_1", type: "function", function: { name: "get_weather", arguments: "{\"city\":\"Paris\"}" } }] },
      { role: "tool", tool_call_id: "call_1", content: "{\"temp_c\": 18}" },
    ],
  });
  assert.equal(followUp.object, "chat.completion");
  console.log("tools ok: prompt", plain.usage.prompt_tokens, "->", withTools.usage.prompt_tokens, "tokens with tools");

  // structured output: response_format json_schema (strict) and json_object
  const person = {
    type: "object", additionalProperties: false, required: ["name", "age"],
    properties: { name: { type: "string", maxLength: 10 }, age: { type: "integer" } },
  };
  for (const seed of [1, 2]) {
    const r = await client.chat.completions.create({
      model, messages, max_tokens: 200, temperature: 1, seed,
      response_format: { type: "json_schema", json_schema: { name: "person", strict: true, schema: person } },
    });
    assert.equal(r.choices[0].finish_reason, "stop");
    const v = JSON.parse(r.choices[0].message.content);
    assert.ok(typeof v.name === "string" && Number.isInteger(v.age) && Object.keys(v).length === 2, JSON.stringify(v));
  }
  // properties come back in the schema's declared order, not sorted
  const declared = {
    type: "object", additionalProperties: false, required: ["zname", "adult"],
    properties: { zname: { type: "string", maxLength: 6 }, adult: { type: "boolean" } },
  };
  const ordered = await client.chat.completions.create({
    model, messages, max_tokens: 200, temperature: 1, seed: 5,
    response_format: { type: "json_schema", json_schema: { name: "person", strict: true, schema: declared } },
  });
  assert.equal(ordered.choices[0].finish_reason, "stop");
  assert.deepEqual(Object.keys(JSON.parse(ordered.choices[0].message.content)), ["zname", "adult"], ordered.choices[0].message.content);
  const obj = await client.chat.completions.create({ model, messages, max_tokens: 300, temperature: 0, response_format: { type: "json_object" } });
  assert.ok(obj.choices[0].message.content.startsWith("{"), "json_object starts an object");
  if (obj.choices[0].finish_reason === "stop") assert.equal(typeof JSON.parse(obj.choices[0].message.content), "object");
  // forced tool calls: a named function and "required", arguments matching the parameters
  const boundedTools = [{ type: "function", function: { name: "lookup", parameters: {
    type: "object", required: ["q", "limit"], properties: { q: { type: "string", maxLength: 8 }, limit: { type: "integer" } } } } }];
  for (const tool_choice of [{ type: "function", function: { name: "lookup" } }, "required"]) {
    const r = await client.chat.completions.create({ model, messages, tools: boundedTools, tool_choice, max_tokens: 120, temperature: 1, seed: 3 });
    assert.equal(r.choices[0].finish_reason, "tool_calls");
    const call = r.choices[0].message.tool_calls[0];
    assert.equal(call.function.name, "lookup");
    const args = JSON.parse(call.function.arguments);
    assert.ok(typeof args.q === "string" && Number.isInteger(args.limit), call.function.arguments);
  }
  // a forced call cut by max_tokens: the call with its partial arguments, finish_reason "length"
  const cut = await client.chat.completions.create({
    model, messages, tools: [{ type: "function", function: { name: "register", parameters: declared } }],
    tool_choice: { type: "function", function: { name: "register" } }, max_tokens: 4, temperature: 0,
  });
  assert.equal(cut.choices[0].finish_reason, "length");
  const cutCall = cut.choices[0].message.tool_calls?.[0];
  assert.equal(cutCall?.function.name, "register", JSON.stringify(cut.choices[0].message));
  assert.ok(cutCall.function.arguments.startsWith("{"), cutCall.function.arguments);
  // what g4 cannot honour is refused, naming the field
  await assert.rejects(client.chat.completions.create({
    model, max_tokens: 4,
    messages: [{ role: "user", content: [{ type: "text", text: "what is this?" }, { type: "image_url", image_url: { url: "data:image/png;base64,AA==" } }] }],
  }), (e) => e.status === 400 && e.param === "messages[0].content[1].type");
  // n: 2 choices from one prefill; choice i is the n = 1 answer with seed + i, streamed too
  const two = await client.chat.completions.create({ model, messages, n: 2, max_tokens: 8, temperature: 1, seed: 11 });
  assert.deepEqual(two.choices.map((c) => c.index), [0, 1]);
  for (const i of [0, 1]) {
    const alone = await client.chat.completions.create({ model, messages, max_tokens: 8, temperature: 1, seed: 11 + i });
    assert.equal(two.choices[i].message.content, alone.choices[0].message.content, `choice ${i}`);
  }
  const twoStream = await client.chat.completions.create({ model, messages, n: 2, max_tokens: 8, temperature: 1, seed: 11, stream: true });
  const streamed = ["", ""];
  for await (const chunk of twoStream) for (const c of chunk.choices) streamed[c.index] += c.delta.content ?? "";
  assert.deepEqual(streamed, two.choices.map((c) => c.message.content));
  await assert.rejects(client.chat.completions.create({ model, messages, n: 99, max_tokens: 4 }), (e) => e.status === 400 && e.param === "n");
  console.log("structured output ok");

  // Responses API: create, stream, previous_response_id; output equal to the chat completion
  const resp = await client.responses.create({ model, instructions: "Be brief.", input: "Name a sea.", max_output_tokens: 10, temperature: 0 });
  assert.equal(resp.object, "response");
  const viaChat = await client.chat.completions.create({
    model, max_tokens: 10, temperature: 0,
    messages: [{ role: "system", content: "Be brief." }, { role: "user", content: "Name a sea." }],
  });
  assert.equal(resp.output_text, viaChat.choices[0].message.content);
  const rs = client.responses.stream({ model, instructions: "Be brief.", input: "Name a sea.", max_output_tokens: 10, temperature: 0 });
  let streamedText = "";
  rs.on("response.output_text.delta", (e) => { streamedText += e.delta; });
  const finalResp = await rs.finalResponse();
  assert.equal(streamedText, resp.output_text);
  assert.equal(finalResp.output[0].content[0].text, resp.output_text);
  const follow = await client.responses.create({
    model, instructions: "Be brief.", previous_response_id: resp.id, input: "Another one?", max_output_tokens: 6, temperature: 0,
  });
  assert.ok(follow.usage.input_tokens_details.cached_tokens > 0, JSON.stringify(follow.usage));
  await assert.rejects(client.responses.create({ model, input: "x", reasoning: { effort: "low" } }), (e) => e.status === 400 && e.param === "reasoning");
  console.log("responses ok: follow-up restored", follow.usage.input_tokens_details.cached_tokens, "of", follow.usage.input_tokens, "input tokens");

  // legacy completions
  const comp = await client.completions.create({ model, prompt: "Once upon a time", max_tokens: 8 });
  assert.equal(typeof comp.choices[0].text, "string");

  // errors surface as the client's typed errors
  await assert.rejects(client.chat.completions.create({ model: "no-such-model", messages }), (e) => e.status === 404);
  await assert.rejects(client.chat.completions.create({ model, messages, max_tokens: -1 }), (e) => e.status === 400 && e.param === "max_tokens");
  const wrongKey = new OpenAI({ baseURL, apiKey: "wrong", maxRetries: 0 });
  await assert.rejects(wrongKey.chat.completions.create({ model, messages }), (e) => e.status === 401);
  console.log("all OpenAI client checks passed");
}

main().catch((e) => {
  console.error("FAILED:", e);
  process.exit(1);
});

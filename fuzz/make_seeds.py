#!/usr/bin/env python3
"""Writes the seed corpora in fuzz/corpus/<target>/ (small; committed). Run from the repo root:
    python3 fuzz/make_seeds.py [G4_BINARY]
Seeds are written by hand here (byte layouts spelled out below) or made by g4 itself: with a g4
binary, `g4 synth --preset tiny-e|tiny-31b|tiny-moe --vocab 512` supplies the config.json and
tokenizer.json seeds. Re-running rewrites the same files."""
import base64, json, os, struct, subprocess, sys, tempfile

ROOT = os.path.join(os.path.dirname(os.path.abspath(__file__)), "corpus")

def put(target, name, data):
    d = os.path.join(ROOT, target)
    os.makedirs(d, exist_ok=True)
    if isinstance(data, str):
        data = data.encode()
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)

# --- safetensors -------------------------------------------------------------------------------
def safetensors(tensors, metadata=None):
    """tensors: list of (name, dtype, shape, bytes)."""
    header, blob = {}, b""
    for name, dtype, shape, data in tensors:
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(blob), len(blob) + len(data)]}
        blob += data
    if metadata is not None:
        header["__metadata__"] = metadata
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    return struct.pack("<Q", len(h)) + h + blob

def f32(*v): return struct.pack("<%df" % len(v), *v)

def seeds_safetensors():
    one = safetensors([("w", "F32", [2, 2], f32(1, 2, 3, 4)), ("b", "BF16", [3], b"\x80\x3f" * 3),
                       ("h", "F16", [1, 2], b"\x00\x3c" * 2)], {"format": "pt"})
    put("safetensors", "single", b"\x00" + one)
    put("safetensors", "empty_tensor", b"\x00" + safetensors([("e", "F32", [0, 4], b""), ("s", "F32", [], f32(7))]))
    put("safetensors", "header_only", b"\x00" + safetensors([]))
    shard = safetensors([("c", "F32", [2], f32(5, 6))])
    index = {"metadata": {"total_size": 40}, "weight_map": {"a": "fixed.safetensors", "b": "fixed.safetensors", "c": "s.safetensors"}}
    put("safetensors", "sharded", b"\x01" + json.dumps(index).encode() + b"\n@@\n" + shard)
    put("safetensors", "sharded_fixed_only", b"\x01" + json.dumps({"weight_map": {"a": "fixed.safetensors"}}).encode())

# --- GGUF --------------------------------------------------------------------------------------
U8, I8, U16, I16, U32, I32, F32, BOOL, STRING, ARRAY, U64, I64, F64 = range(13)
SCALAR = {U8: "B", I8: "b", U16: "H", I16: "h", U32: "I", I32: "i", F32: "f", BOOL: "?", U64: "Q", I64: "q", F64: "d"}

def gstr(s):
    b = s.encode() if isinstance(s, str) else s
    return struct.pack("<Q", len(b)) + b

def gval(t, v):
    if t == STRING: return gstr(v)
    if t == ARRAY:
        et, items = v
        return struct.pack("<IQ", et, len(items)) + b"".join(gval(et, x) for x in items)
    return struct.pack("<" + SCALAR[t], v)

def gguf(kvs, tensors, alignment=32):
    """kvs: list of (key, type, value); tensors: list of (name, ne list, ggml type, data bytes)."""
    out = b"GGUF" + struct.pack("<IQQ", 3, len(tensors), len(kvs))
    for k, t, v in kvs:
        out += gstr(k) + struct.pack("<I", t) + gval(t, v)
    offsets, data = [], b""
    for name, ne, gt, blob in tensors:
        data += b"\x00" * (-len(data) % alignment)
        offsets.append(len(data))
        data += blob
    for (name, ne, gt, blob), off in zip(tensors, offsets):
        out += gstr(name) + struct.pack("<I", len(ne)) + b"".join(struct.pack("<Q", n) for n in ne) + struct.pack("<IQ", gt, off)
    out += b"\x00" * (-len(out) % alignment)
    return out + data

def seeds_gguf():
    kvs = [("general.architecture", STRING, "gemma4"), ("general.alignment", U32, 32),
           ("a.u8", U8, 1), ("a.i8", I8, -1), ("a.u16", U16, 2), ("a.i16", I16, -2), ("a.i32", I32, -3),
           ("a.u64", U64, 2**63 + 5), ("a.i64", I64, -4), ("a.f32", F32, 0.5), ("a.f64", F64, 1e-6), ("a.b", BOOL, True),
           ("a.arr", ARRAY, (I32, [1, 2, 3])), ("a.strs", ARRAY, (STRING, ["x", "yz"])),
           ("a.nested", ARRAY, (ARRAY, [(U8, [1, 2]), (F32, [1.5])]))]
    q8 = b"\x00\x3c" + bytes(range(32))  # one Q8_0 block: f16 d = 1, 32 int8
    tensors = [("t.f32", [4, 2], 0, f32(*range(8))), ("t.f16", [2], 1, b"\x00\x3c" * 2),
               ("t.bf16", [2], 30, b"\x80\x3f" * 2), ("t.q8", [32], 8, q8)]
    put("gguf", "types", gguf(kvs, tensors))
    put("gguf", "empty", gguf([], []))
    L = 2
    cfg = [("general.architecture", STRING, "gemma4"), ("gemma4.block_count", U32, L), ("gemma4.embedding_length", U32, 8),
           ("gemma4.attention.head_count", U32, 2), ("gemma4.attention.head_count_kv", ARRAY, (I32, [1, 1])),
           ("gemma4.attention.key_length", U32, 8), ("gemma4.attention.key_length_swa", U32, 4),
           ("gemma4.attention.layer_norm_rms_epsilon", F32, 1e-6), ("gemma4.attention.sliding_window", U32, 16),
           ("gemma4.attention.sliding_window_pattern", ARRAY, (BOOL, [True, False])),
           ("gemma4.feed_forward_length", ARRAY, (I32, [16, 16])), ("gemma4.context_length", U32, 256),
           ("gemma4.rope.freq_base", F32, 1e6), ("gemma4.rope.freq_base_swa", F32, 1e4),
           ("gemma4.rope.dimension_count", U32, 8), ("gemma4.rope.dimension_count_swa", U32, 4),
           ("gemma4.final_logit_softcapping", F32, 30.0), ("gemma4.attention.shared_kv_layers", U32, 0),
           ("tokenizer.ggml.model", STRING, "gemma4"), ("tokenizer.ggml.pre", STRING, "gemma4"),
           ("tokenizer.ggml.tokens", ARRAY, (STRING, ["<pad>", "<eos>", "<bos>", "<unk>", "a", "b", "ab", "\u2581"] + ["<0x%02X>" % i for i in range(256)])),
           ("tokenizer.ggml.token_type", ARRAY, (I32, [3, 3, 3, 2, 1, 1, 1, 1] + [6] * 256)),
           ("tokenizer.ggml.merges", ARRAY, (STRING, ["a b"])),
           ("tokenizer.ggml.bos_token_id", U32, 2), ("tokenizer.ggml.eos_token_id", U32, 1),
           ("tokenizer.ggml.padding_token_id", U32, 0), ("tokenizer.ggml.add_bos_token", BOOL, True)]
    put("gguf", "gemma4_metadata", gguf(cfg, [("token_embd.weight", [8, 264], 0, f32(*([0.0] * 8 * 264)))]))
    # The real layout's metadata (the tiny-e fixture's key/value section, no tensors), when present.
    fixture = os.path.join(os.path.dirname(ROOT), "..", "..", "shared", "fixtures", "gemma4-tiny", "tiny-e", "model.gguf")
    if os.path.exists(fixture):
        d = open(fixture, "rb").read()
        n_t, n_kv = struct.unpack("<QQ", d[8:24])
        pos = 24
        def skip_val(t, pos):
            if t == STRING:
                n, = struct.unpack("<Q", d[pos:pos + 8]); return pos + 8 + n
            if t == ARRAY:
                et, n = struct.unpack("<IQ", d[pos:pos + 12]); pos += 12
                for _ in range(n): pos = skip_val(et, pos)
                return pos
            return pos + struct.calcsize("<" + SCALAR[t])
        for _ in range(n_kv):
            n, = struct.unpack("<Q", d[pos:pos + 8]); pos += 8 + n
            t, = struct.unpack("<I", d[pos:pos + 4]); pos = skip_val(t, pos + 4)
        body = d[24:pos]
        if len(body) < 60000:
            out = b"GGUF" + struct.pack("<IQQ", 3, 0, n_kv) + body
            put("gguf", "tiny_e_metadata", out + b"\x00" * (-len(out) % 32))

# --- config.json, tokenizer.json (made by g4 synth) -----------------------------------------------
def seeds_synth(g4):
    hand = {"model_type": "gemma4_text", "vocab_size": 512, "hidden_size": 64, "intermediate_size": 128,
            "num_hidden_layers": 2, "num_attention_heads": 4, "num_key_value_heads": 1, "head_dim": 16,
            "global_head_dim": 32, "sliding_window": 8, "layer_types": ["sliding_attention", "full_attention"],
            "rope_parameters": {"sliding_attention": {"rope_type": "default", "rope_theta": 10000.0},
                                "full_attention": {"rope_type": "proportional", "partial_rotary_factor": 0.25, "rope_theta": 1000000.0}}}
    put("config", "hand_text", json.dumps(hand))
    put("config", "hand_unified", json.dumps({"model_type": "gemma4_unified", "text_config": dict(hand, model_type="gemma4_unified_text")}))
    vision = {"model_type": "gemma4_vision", "hidden_size": 48, "intermediate_size": 96, "num_hidden_layers": 2,
              "num_attention_heads": 3, "num_key_value_heads": 3, "head_dim": 16, "patch_size": 4, "pooling_kernel_size": 3,
              "position_embedding_size": 64, "rms_norm_eps": 1e-6, "rope_parameters": {"rope_type": "default", "rope_theta": 100.0},
              "use_clipped_linears": True, "standardize": False, "hidden_activation": "gelu_pytorch_tanh"}
    put("config", "hand_vision", json.dumps({"model_type": "gemma4", "text_config": hand, "vision_config": vision}))
    if not g4:
        return
    with tempfile.TemporaryDirectory() as tmp:
        for preset in ["tiny-e", "tiny-31b", "tiny-moe"]:
            out = os.path.join(tmp, preset)
            subprocess.run([g4, "synth", "--preset", preset, "--out", out, "--vocab", "512"], check=True, capture_output=True)
            put("config", preset, open(os.path.join(out, "config.json"), "rb").read())
            if preset == "tiny-e":
                tj = open(os.path.join(out, "tokenizer.json"), "rb").read()
                tc = open(os.path.join(out, "tokenizer_config.json"), "rb").read()
                put("tokenizer_json", "synth512", tj + b"\n@@\n" + tc)
                put("tokenizer_json", "synth512_no_config", tj)
    small = {"version": "1.0", "added_tokens": [{"id": 0, "content": "<pad>", "special": True}, {"id": 2, "content": "<bos>", "special": True}],
             "normalizer": {"type": "Replace", "pattern": {"String": " "}, "content": "\u2581"}, "pre_tokenizer": None,
             "model": {"type": "BPE", "byte_fallback": True, "fuse_unk": True, "unk_token": "<unk>",
                       "vocab": dict([("<pad>", 0), ("<eos>", 1), ("<bos>", 2), ("<unk>", 3), ("a", 4), ("b", 5), ("ab", 6), ("\u2581", 7)] +
                                     [("<0x%02X>" % i, 8 + i) for i in range(256)]),
                       "merges": [["a", "b"]]}}
    put("tokenizer_json", "hand_small", json.dumps(small) + "\n@@\n" + json.dumps({"bos_token": "<bos>", "eos_token": "<eos>", "add_bos_token": True}))

# --- chat template, OpenAI requests, tokenizer text -----------------------------------------------
def seeds_text():
    tools = [{"type": "function", "function": {"name": "get_weather", "description": "Weather for a city",
              "parameters": {"type": "object", "properties": {"city": {"type": "string", "enum": ["Paris", "Oslo"]},
                                                                "days": {"type": "integer"}}, "required": ["city"]}}}]
    conv = [{"role": "system", "content": "Be brief."}, {"role": "user", "content": "Weather in Paris?"},
            {"role": "assistant", "content": None, "reasoning_content": "need the tool",
             "tool_calls": [{"id": "c1", "type": "function", "function": {"name": "get_weather", "arguments": "{\"city\": \"Paris\"}"}}]},
            {"role": "tool", "tool_call_id": "c1", "name": "get_weather", "content": "{\"temp\": 21}"},
            {"role": "assistant", "content": "21 degrees."}, {"role": "user", "content": [{"type": "text", "text": "And Oslo?"}]}]
    put("chat_template", "simple", json.dumps([{"role": "user", "content": "Hello"}]))
    put("chat_template", "tools", json.dumps({"messages": conv, "tools": tools, "thinking": True, "preserve": True}))
    put("chat_template", "developer_parts", json.dumps({"messages": [{"role": "developer", "content": [{"type": "text", "text": "sys"}]},
        {"role": "user", "content": [{"type": "image_url", "image_url": {"url": "x"}}, {"type": "text", "text": "what?"}]}],
        "empty_thought": True, "gen": False}))
    chat = {"model": "tiny", "messages": [{"role": "user", "content": "hi"}]}
    put("openai_request", "chat_min", json.dumps(chat))
    put("openai_request", "chat_full", json.dumps(dict(chat, messages=conv, tools=tools, tool_choice="auto", max_tokens=16,
        temperature=0.7, top_p=0.9, top_k=40, min_p=0.05, presence_penalty=0.5, frequency_penalty=0.1, seed=7,
        stop=["\n\n", "END"], logit_bias={"5": -100}, logprobs=True, top_logprobs=3, stream=True,
        stream_options={"include_usage": True}, chat_template_kwargs={"enable_thinking": True}, g4={"deadline_ms": 1000})))
    put("openai_request", "chat_reasoning", json.dumps(dict(chat, reasoning_effort="high", max_completion_tokens=8,
        tool_choice={"type": "function", "function": {"name": "get_weather"}}, tools=tools)))
    put("openai_request", "completion_text", json.dumps({"model": "tiny", "prompt": "Once upon", "max_tokens": 8, "logprobs": 2, "stop": "x", "echo": False}))
    put("openai_request", "completion_tokens", json.dumps({"model": "tiny", "prompt": [2, 17, 99], "stream": True}))
    png = bytes.fromhex("89504e470d0a1a0a0000000d4948445200000001000000010806000000") + b"\x1f\x15\xc4\x89"
    data_url = "data:image/png;base64," + base64.b64encode(png).decode()
    put("openai_request", "chat_images", json.dumps(dict(chat, messages=[{"role": "user", "content": [
        {"type": "image_url", "image_url": {"url": data_url, "detail": "low"}},
        {"type": "image_url", "image_url": "https://example.com/a.png"},
        {"type": "text", "text": "what is it"}]}], g4={"max_image_tokens": 140})))
    put("data_url", "png", data_url)
    put("data_url", "padded", "data:image/jpeg;base64,/9j/4A==")
    put("data_url", "bad_char", "data:image/webp;base64,UklG*kY=")
    put("data_url", "not_base64", "data:image/png,raw")
    put("data_url", "text_type", "data:text/plain;base64,aGk=")
    put("openai_request", "bad_utf8", b'{"model": "tiny", "prompt": "\xff\xfe"}')
    put("tokenizer_encode", "english", "The quick brown fox jumps over the lazy dog.  Twice!\n\n")
    put("tokenizer_encode", "code", "def f(x):\n\treturn x ** 2  # square\n")
    put("tokenizer_encode", "control", "<bos><|turn>user\nhi<turn|>\n<|turn>model\n<|tool_call>call:f{}<tool_call|>")
    put("tokenizer_encode", "unicode", "caf\u00e9 \u65e5\u672c\u8a9e \U0001F600 \u2581\u2581x")
    put("tokenizer_encode", "invalid_utf8", b"a\xff\xc3(b\xe2\x82\xed\xa0\x80\xf4\x90\x80\x80")

if __name__ == "__main__":
    seeds_safetensors()
    seeds_gguf()
    seeds_synth(sys.argv[1] if len(sys.argv) > 1 else None)
    seeds_text()

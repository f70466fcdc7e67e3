#!/usr/bin/env python3
"""Soak driver for `g4 serve` (scripts/soak.sh starts the server and runs this). Standard library only.

Drives 127.0.0.1:PORT for --seconds with a mix of: non-streaming and streaming chat and completion
requests, streams the client abandons after the first events, malformed requests, bursts that
overflow the queue, and /health, /ready, /metrics. Samples the server process (VmRSS, open file
descriptors, threads) every --sample seconds.

Fails (exit 1) when:
  * any response has a 5xx status (including an error event inside a stream);
  * a completed stream lacks its final chunk (one with a finish_reason) or `data: [DONE]`;
  * a malformed request is not answered 4xx, or a good one gets anything but 200 or 429;
  * resident memory grows after warm-up: samples after the first --warmup fraction of the run are
    split in thirds and max(RSS, last third) must be <= max(RSS, first third) * 1.10 + 8 MiB;
  * open file descriptors or threads, measured idle after the load, exceed their idle values
    measured before it (they must return to baseline);
  * with --prefix-cache-mb, the server's prefix cache restored no token (most chats share a long
    system prompt) or holds more than its budget.
A connection reset before any response byte (the kernel's accept queue overflowed) is counted and
reported, not failed. Writes a JSON report (--report) with the samples and counts."""
import argparse, http.client, json, os, random, socket, sys, threading, time

P = argparse.ArgumentParser()
P.add_argument("--port", type=int, required=True)
P.add_argument("--pid", type=int, required=True)
P.add_argument("--seconds", type=float, default=600)
P.add_argument("--workers", type=int, default=6)
P.add_argument("--sample", type=float, default=2.0)
P.add_argument("--warmup", type=float, default=0.2)
P.add_argument("--model", default="")
P.add_argument("--report", default="")
P.add_argument("--prefix-cache-mb", type=float, default=0, help="the server's budget: its cache must stay within it")
A = P.parse_args()

lock = threading.Lock()
counts = {}
failures = []


def count(key, n=1):
    with lock:
        counts[key] = counts.get(key, 0) + n


def fail(msg):
    with lock:
        if len(failures) < 50:
            failures.append(msg)
    count("failures")


def conn():
    return http.client.HTTPConnection("127.0.0.1", A.port, timeout=120)


def request(method, path, body=None, raw=None):
    c = conn()
    try:
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        c.request(method, path, body=data, headers={"Content-Type": "application/json"} if data is not None else {})
        r = c.getresponse()
        return r.status, r.read(), r.getheader("Retry-After")
    finally:
        c.close()


# Most chats share one long system prompt, and some resend an earlier turn: the prefix cache
# restores those prefixes under load (its hit tokens and bytes are checked at the end).
SYSTEM = ("You are the assistant of a harbour office. Answer questions about tides, berths, pilots, cargo "
          "manifests and customs forms. Be brief, state units, and say when you are unsure. ") * 3


def chat_body(stream, max_tokens):
    user = random.choice(["hi", "Name three rivers.", "2+2?", "Write a haiku."])
    messages = [{"role": "user", "content": user}]
    if random.random() < 0.7:
        messages.insert(0, {"role": "system", "content": SYSTEM})
    if random.random() < 0.3:
        messages[-1:-1] = [{"role": "user", "content": "When is high tide?"}, {"role": "assistant", "content": "At 14:05."}]
    return {"model": A.model, "stream": stream, "max_tokens": max_tokens, "temperature": random.choice([0, 0.8]),
            "messages": messages}


def completion_body(stream, max_tokens):
    return {"model": A.model, "stream": stream, "max_tokens": max_tokens, "prompt": random.choice(["Once upon", "def f(x):"])}


def check_status(what, status, body, allowed=(200, 429)):
    count("status_%d" % status)
    if status >= 500:
        fail("%s: %d %s" % (what, status, body[:200]))
    elif status not in allowed:
        fail("%s: unexpected %d %s" % (what, status, body[:200]))


def non_stream(kind):
    body = chat_body(False, random.randint(1, 24)) if kind == "chat" else completion_body(False, random.randint(1, 24))
    status, data, retry = request("POST", "/v1/%s" % ("chat/completions" if kind == "chat" else "completions"), body)
    check_status("non-stream " + kind, status, data)
    if status == 429 and not retry:
        fail("429 without Retry-After")
    if status == 200:
        j = json.loads(data)
        if not j.get("choices") or j["choices"][0].get("finish_reason") is None:
            fail("non-stream %s without finish_reason: %s" % (kind, data[:200]))
    count("requests")


def stream(kind, abandon=False):
    body = chat_body(True, random.randint(4, 48)) if kind == "chat" else completion_body(True, random.randint(4, 48))
    c = conn()
    try:
        c.request("POST", "/v1/%s" % ("chat/completions" if kind == "chat" else "completions"), body=json.dumps(body).encode(),
                  headers={"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status != 200:
            check_status("stream " + kind, r.status, r.read())
            count("requests")
            return
        count("status_200")
        finished = done = False
        events = 0
        while True:
            try:
                line = r.readline()
            except Exception as e:
                fail("stream %s broken after %d events: %s: %s" % (kind, events, type(e).__name__, e))
                return
            if not line:
                break
            line = line.strip()
            if not line.startswith(b"data:"):
                continue
            payload = line[5:].strip()
            events += 1
            if abandon and events >= random.randint(1, 3):
                c.sock.shutdown(socket.SHUT_RDWR)  # the client goes away mid-stream
                count("abandoned_streams")
                count("requests")
                return
            if payload == b"[DONE]":
                done = True
                break
            j = json.loads(payload)
            if "error" in j:
                code = j["error"].get("code")
                fail("stream %s error event: %s" % (kind, payload[:200]))
                continue
            for ch in j.get("choices", []):
                if ch.get("finish_reason") is not None:
                    finished = True
        if not (finished and done):
            fail("stream %s ended without %s" % (kind, "final chunk" if not finished else "[DONE]"))
        count("streams_completed")
        count("requests")
    finally:
        c.close()


MALFORMED = [
    (b"{not json", (400,)),
    (b"[]", (400,)),
    (b'{"model": "x"}', (400, 404)),
    (json.dumps({"messages": "hi"}).encode(), (400,)),
    (json.dumps({"messages": [{"role": "user", "content": 5}]}).encode(), (400,)),
    (json.dumps({"messages": [{"role": "user", "content": "hi"}], "max_tokens": -3}).encode(), (400,)),
    (json.dumps({"messages": [{"role": "user", "content": "hi"}], "temperature": "hot"}).encode(), (400,)),
    (json.dumps({"messages": [{"role": "user", "content": "hi"}], "model": "no-such-model"}).encode(), (400, 404)),
    (b'{"messages": [{"role": "user", "content": "\xff\xfe"}]}', (400,)),
    (json.dumps({"messages": [{"role": "user", "content": "x " * 5000}]}).encode(), (400,)),
]


def malformed():
    raw, allowed = random.choice(MALFORMED)
    path = random.choice(["/v1/chat/completions", "/v1/completions"])
    status, data, _ = request("POST", path, raw=raw)
    count("malformed")
    count("requests")
    count("status_%d" % status)
    if status >= 500 or not (400 <= status < 500):
        fail("malformed %r on %s: %d %s" % (raw[:60], path, status, data[:200]))
    else:
        try:
            if not json.loads(data)["error"]["message"]:
                fail("error without message")
        except Exception:
            fail("malformed request answered without an OpenAI error object: %s" % data[:200])


def guarded(fn, *args):
    try:
        fn(*args)
    except (ConnectionResetError, http.client.RemoteDisconnected) as e:
        # Reset before any response byte: the kernel dropped the connection from the server's
        # full accept queue (cpp-httplib listens with a backlog of 5). Counted and reported (with
        # the kernel's ListenOverflows delta), not a failure: no request reached g4.
        count("connection_resets_before_response")
    except Exception as e:  # a connection error is a failure too (reset, refused, timeout)
        fail("%s%r raised %s: %s" % (fn.__name__, args, type(e).__name__, e))


def burst():
    threads = [threading.Thread(target=guarded, args=(non_stream, "chat")) for _ in range(16)]
    for t in threads:
        t.start()
        time.sleep(0.003)  # staggered connects: requests pile up in g4's queue, not the kernel's
    for t in threads:
        t.join()
    count("bursts")


def probes():
    for path in ["/health", "/ready", "/metrics"]:
        status, data, _ = request("GET", path)
        count("requests")
        check_status("GET " + path, status, data, allowed=(200,))


ACTIONS = [(non_stream, ("chat",), 20), (non_stream, ("completion",), 8), (stream, ("chat",), 20), (stream, ("completion",), 8),
           (stream, ("chat", True), 12), (malformed, (), 15), (burst, (), 2), (probes, (), 5)]

stop = threading.Event()


def worker(seed):
    rnd = random.Random(seed)
    total = sum(w for _, _, w in ACTIONS)
    while not stop.is_set():
        x = rnd.uniform(0, total)
        for fn, args, w in ACTIONS:
            x -= w
            if x <= 0:
                break
        guarded(fn, *args)


def proc_sample():
    st = {}
    with open("/proc/%d/status" % A.pid) as f:
        for line in f:
            k, _, v = line.partition(":")
            st[k] = v.strip()
    return {"t": round(time.time() - t0, 1), "rss_kb": int(st["VmRSS"].split()[0]), "threads": int(st["Threads"]),
            "fds": len(os.listdir("/proc/%d/fd" % A.pid))}


def idle_sample(settle=3.0):
    time.sleep(settle)
    return proc_sample()


def listen_overflows():
    try:
        with open("/proc/net/netstat") as f:
            lines = [l.split() for l in f if l.startswith("TcpExt:")]
        return int(dict(zip(lines[0], lines[1])).get("ListenOverflows", 0))
    except Exception:
        return 0


overflows0 = listen_overflows()
t0 = time.time()
if not A.model:
    A.model = json.loads(request("GET", "/v1/models")[1])["data"][0]["id"]
baseline = idle_sample(1.0)
samples = []
workers = [threading.Thread(target=worker, args=(i,), daemon=True) for i in range(A.workers)]
for w in workers:
    w.start()
load_start = time.time()
while time.time() - load_start < A.seconds:
    time.sleep(A.sample)
    samples.append(proc_sample())
stop.set()
for w in workers:
    w.join(timeout=180)
# Back to idle: fds and threads must come back to the baseline (allow a few seconds to settle).
end = proc_sample()
for _ in range(20):
    end = idle_sample(1.0)
    if end["fds"] <= baseline["fds"] and end["threads"] <= baseline["threads"]:
        break

after_warmup = [s for s in samples if s["t"] - samples[0]["t"] >= A.warmup * A.seconds] if samples else []
third = max(1, len(after_warmup) // 3)
first, last = after_warmup[:third], after_warmup[-third:]
verdict = {}
if first and last:
    rss_first = max(s["rss_kb"] for s in first)
    rss_last = max(s["rss_kb"] for s in last)
    limit = rss_first * 1.10 + 8 * 1024
    verdict["rss_first_third_max_kb"], verdict["rss_last_third_max_kb"], verdict["rss_limit_kb"] = rss_first, rss_last, int(limit)
    if rss_last > limit:
        fail("RSS grew after warm-up: last third max %d KiB > first third max %d KiB * 1.10 + 8 MiB" % (rss_last, rss_first))
else:
    fail("too few samples to judge memory (run longer)")
if end["fds"] > baseline["fds"]:
    fail("open file descriptors did not return to baseline: %d idle before, %d idle after" % (baseline["fds"], end["fds"]))
if end["threads"] > baseline["threads"]:
    fail("threads did not return to baseline: %d idle before, %d idle after" % (baseline["threads"], end["threads"]))
if A.prefix_cache_mb > 0:
    metrics = request("GET", "/metrics")[1].decode()
    value = lambda name: float(next((l.split()[1] for l in metrics.splitlines() if l.startswith(name + " ")), "0"))
    verdict["prefix_cache_hit_tokens"] = value("g4_prefix_cache_hit_tokens_total")
    verdict["prefix_cache_bytes"] = value("g4_prefix_cache_bytes")
    verdict["prefix_cache_evictions"] = value("g4_prefix_cache_evictions_total")
    if verdict["prefix_cache_hit_tokens"] <= 0:
        fail("the prefix cache restored nothing although most chats share a system prompt")
    if verdict["prefix_cache_bytes"] > A.prefix_cache_mb * (1 << 20):
        fail("the prefix cache holds %d bytes, over its budget of %g MiB" % (verdict["prefix_cache_bytes"], A.prefix_cache_mb))
if counts.get("status_429", 0) == 0:
    print("soak: note: no request was refused with 429 (the bursts did not overflow the queue)")

counts["kernel_listen_overflows"] = listen_overflows() - overflows0  # whole host, not only this server
report = {"seconds": A.seconds, "counts": counts, "baseline": baseline, "end": end, "verdict": verdict,
          "peak": {k: max(s[k] for s in samples) for k in ("rss_kb", "fds", "threads")} if samples else {},
          "failures": failures, "samples": samples}
if A.report:
    with open(A.report, "w") as f:
        json.dump(report, f, indent=1)
print("soak: %d requests (%s)" % (counts.get("requests", 0), ", ".join("%s=%d" % kv for kv in sorted(counts.items()))))
print("soak: idle before: rss %d KiB, fds %d, threads %d; idle after: rss %d KiB, fds %d, threads %d; peak %s" %
      (baseline["rss_kb"], baseline["fds"], baseline["threads"], end["rss_kb"], end["fds"], end["threads"], report["peak"]))
if verdict:
    print("soak: RSS after warm-up: first third max %d KiB, last third max %d KiB (limit %d KiB)" %
          (verdict["rss_first_third_max_kb"], verdict["rss_last_third_max_kb"], verdict["rss_limit_kb"]))
if failures:
    print("soak: FAILED:\n  " + "\n  ".join(failures), file=sys.stderr)
    sys.exit(1)
print("soak: passed")

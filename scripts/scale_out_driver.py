#!/usr/bin/env python3
"""Drives scripts/scale-out-test.sh: three `g4 serve` replicas behind nginx on 127.0.0.1.

Standard library only. It owns the replica and nginx processes (their ids go to --pids so the
shell's trap can end them if this process dies) and runs three phases under a mixed load:

  affinity  half of the workers send X-Session-Id, half send none. Every session must reach one
            replica only, and no request may fail. The prefix-cache hit rate (cached prompt tokens
            over prompt tokens) and lost previous_response_id chains are reported for both halves.
  rolling   the replicas get SIGTERM one at a time; each must drain and exit 0, and is started
            again on its port; the next goes once it answers /ready and nginx has let it back in
            (fail_timeout). No request may fail.
  kill      one replica gets SIGKILL. The only failures accepted are streams that had already
            received their response headers from that replica (nginx cannot resend a stream it
            has begun to pass on) and were cut after the kill. A long stream started there just
            before the kill must be among them (else the phase tested nothing). Sessions of the
            other replicas must stay where they were; the killed replica's sessions must each move
            to one survivor.

A failed request is one that did not complete: no response, a status other than 200, or a stream
without its final event. A /v1/responses turn answered 400 previous_response_not_found (the
replica that stored the chain restarted, or a request without X-Session-Id reached another one)
is counted as `chain lost`, not as a failure: the client resends the whole conversation, as a
real one must, and that resent request has to succeed.
"""
import argparse
import http.client
import json
import os
import random
import re
import signal
import subprocess
import sys
import threading
import time

SYSTEM = ("You are the support assistant of a hardware shop. Answer briefly and politely, name the "
          "part number when you know it, never invent prices, and ask one question when the "
          "customer's request is unclear. Opening hours are nine to six, Monday to Saturday.")
WORDS = ("cable adapter fan drive board socket screw panel switch relay fuse spring bolt valve pump "
         "sensor filter bracket hinge clamp washer gasket bearing pulley lever knob dial gauge").split()


def now():
    return time.monotonic()


def wait_for_200(port, path, proc, timeout):
    """Polls GET path on 127.0.0.1:port until it answers 200 (True), proc exits or timeout passes."""
    until = now() + timeout
    while now() < until and proc.poll() is None:
        try:
            c = http.client.HTTPConnection("127.0.0.1", port, timeout=2)
            c.request("GET", path)
            if c.getresponse().status == 200:
                return True
        except OSError:
            pass
        time.sleep(0.1)
    return False


class Replica:
    def __init__(self, idx, port, args):
        self.idx, self.port, self.args = idx, port, args
        self.proc = None
        self.log = os.path.join(args.work, f"replica{idx}.log")

    def start(self):
        a = self.args
        cmd = [a.g4, "serve", "--model", a.model, "--host", "127.0.0.1", "--port", str(self.port),
               "--threads", "1", "--max-seqs", "4", "--queue", "64", "--ctx", "2048",
               "--request-timeout", str(a.request_timeout), "--drain-timeout", "30",
               "--prefix-cache-mb", "64", "--ready-interval", "0", "--name", "tiny"]
        with open(self.log, "ab") as log:
            self.proc = subprocess.Popen(cmd, stdout=log, stderr=log)

    def alive(self):
        return self.proc is not None and self.proc.poll() is None

    def wait_ready(self, timeout):
        if not wait_for_200(self.port, "/ready", self.proc, timeout):
            raise SystemExit(f"scale-out: replica {self.idx} (port {self.port}) not ready after {timeout}s "
                             f"(exit status {self.proc.poll()}); see {self.log}")


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.records = []

    def add(self, r):
        with self.lock:
            self.records.append(r)


class Load:
    """Worker threads, each with its own sessions, sending conversations through nginx."""

    def __init__(self, args, stats):
        self.args, self.stats = args, stats
        self.phase = "affinity"
        self.stop = threading.Event()
        self.seq = 0
        self.seq_lock = threading.Lock()
        self.threads = []

    def next_id(self):
        with self.seq_lock:
            self.seq += 1
            return f"r{self.seq}"

    def start(self):
        for w in range(self.args.workers):
            t = threading.Thread(target=self.worker, args=(w,), daemon=True)
            t.start()
            self.threads.append(t)

    def finish(self):
        self.stop.set()
        for t in self.threads:
            t.join(timeout=self.args.request_timeout + 30)

    def worker(self, w):
        rnd = random.Random(w)
        # Even workers send X-Session-Id (affinity), odd ones none. Each worker owns a fixed set of
        # sessions, so a session's replica can be compared across phases.
        affinity = w % 2 == 0
        sessions = [f"w{w}s{k}" for k in range(self.args.sessions_per_worker)]
        k = 0
        while not self.stop.is_set():
            self.conversation(rnd, sessions[k % len(sessions)], affinity)
            k += 1

    def conversation(self, rnd, session, affinity):
        # Streams are longer than the other requests, so that the SIGKILL finds some in flight.
        # Every third session speaks /v1/responses with previous_response_id, the others chat
        # completions that resend the growing history (streamed on alternate turns).
        responses = int(session.split("s")[-1]) % 3 == 0
        history, prev_id = [], None
        for turn in range(3):
            if self.stop.is_set():
                return
            user = " ".join(rnd.choice(WORDS) for _ in range(30)) + f" ({session} turn {turn} {rnd.random():.6f})"
            if responses:
                rec = self.responses_turn(session, affinity, user, history, prev_id)
                if rec.get("function_call"):
                    # The random-weight model sometimes writes a tool call with arguments that are
                    # not JSON; g4 then refuses a follow-up naming that response (400 invalid_prompt,
                    # a g4 issue apart from scale-out). Start a new conversation instead.
                    return
                if rec.get("response_id"):
                    prev_id = rec["response_id"]
                    history += [{"role": "user", "content": user},
                                {"role": "assistant", "content": rec.get("text", "")}]
                else:
                    return
            else:
                rec = self.chat_turn(session, affinity, user, history, stream=turn % 2 == 1)
                if not rec["ok"]:
                    return
                history += [{"role": "user", "content": user}, {"role": "assistant", "content": rec.get("text", "")}]

    def headers(self, session, affinity, rid):
        h = {"Content-Type": "application/json", "X-Request-Id": rid}
        if affinity:
            h["X-Session-Id"] = session
        return h

    def chat_turn(self, session, affinity, user, history, stream):
        msgs = [{"role": "system", "content": SYSTEM}] + history + [{"role": "user", "content": user}]
        body = {"model": "tiny", "messages": msgs, "max_tokens": 96 if stream else 12, "temperature": 0.7,
                "stream": stream}
        if stream:
            body["stream_options"] = {"include_usage": True}
        return self.send("chat_stream" if stream else "chat", "/v1/chat/completions", body, session, affinity)

    def responses_turn(self, session, affinity, user, history, prev_id):
        body = {"model": "tiny", "input": user, "max_output_tokens": 12, "temperature": 0.7}
        if prev_id:
            body["previous_response_id"] = prev_id
        rec = self.send("responses", "/v1/responses", body, session, affinity)
        if rec.get("cause") == "chain_lost":
            # What a client must do when the replica that stored the chain is gone: resend it all.
            body.pop("previous_response_id")
            body["input"] = history + [{"role": "user", "content": user}]
            rec = self.send("responses", "/v1/responses", body, session, affinity)
        return rec

    def send(self, kind, path, body, session, affinity, on_headers=None):
        rid = self.next_id()
        rec = {"id": rid, "kind": kind, "session": session, "affinity": affinity, "phase": self.phase,
               "start": now(), "headers_at": None, "ok": False, "cause": None, "prompt": 0, "cached": 0}
        stream = bool(body.get("stream"))
        try:
            c = http.client.HTTPConnection("127.0.0.1", self.args.nginx_port, timeout=self.args.request_timeout + 30)
            c.request("POST", path, json.dumps(body), self.headers(session, affinity, rid))
            resp = c.getresponse()
            rec["headers_at"] = now()
            rec["status"] = resp.status
            if on_headers:
                on_headers()
            if resp.status != 200:
                data = resp.read()
                code = ""
                try:
                    code = json.loads(data)["error"].get("code") or ""
                except (ValueError, KeyError, TypeError, AttributeError):
                    pass
                rec["cause"] = "chain_lost" if code == "previous_response_not_found" else f"http_{resp.status}"
                rec["detail"] = data[:200].decode("utf-8", "replace")
            elif stream:
                self.read_stream(resp, rec)
            else:
                self.read_json(json.loads(resp.read()), kind, rec)
            c.close()
        except (OSError, http.client.HTTPException, ValueError) as e:
            rec["cause"] = "stream_cut" if rec["headers_at"] is not None else "no_response"
            rec["detail"] = f"{type(e).__name__}: {e}"
        rec["end"] = now()
        self.stats.add(rec)
        return rec

    @staticmethod
    def read_json(obj, kind, rec):
        if kind == "responses":
            if obj.get("status") not in ("completed", "incomplete"):
                rec["cause"] = "bad_body"
                return
            u = obj.get("usage") or {}
            rec["prompt"] = u.get("input_tokens", 0)
            rec["cached"] = (u.get("input_tokens_details") or {}).get("cached_tokens", 0)
            rec["response_id"] = obj.get("id")
            rec["function_call"] = any(item.get("type") == "function_call" for item in obj.get("output", []))
            rec["text"] = "".join(p.get("text", "") for item in obj.get("output", []) if item.get("type") == "message"
                                  for p in item.get("content", []))
        else:
            if not obj.get("choices"):
                rec["cause"] = "bad_body"
                return
            u = obj.get("usage") or {}
            rec["prompt"] = u.get("prompt_tokens", 0)
            rec["cached"] = (u.get("prompt_tokens_details") or {}).get("cached_tokens", 0)
            rec["text"] = obj["choices"][0].get("message", {}).get("content") or ""
        rec["ok"] = True

    @staticmethod
    def read_stream(resp, rec):
        finished, done, text = False, False, []
        for raw in resp:
            line = raw.decode("utf-8", "replace").strip()
            if not line.startswith("data:"):
                continue
            data = line[5:].strip()
            if data == "[DONE]":
                done = True
                break
            ev = json.loads(data)
            if "error" in ev:
                rec["cause"] = "stream_error"
                rec["detail"] = data[:200]
                return
            for ch in ev.get("choices") or []:
                text.append((ch.get("delta") or {}).get("content") or "")
                finished = finished or bool(ch.get("finish_reason"))
            if ev.get("usage"):
                rec["prompt"] = ev["usage"].get("prompt_tokens", 0)
                rec["cached"] = (ev["usage"].get("prompt_tokens_details") or {}).get("cached_tokens", 0)
        if finished and done:
            rec["ok"] = True
            rec["text"] = "".join(text)
        else:
            # http.client reads a chunked body that nginx cut off as an early end, or raises.
            rec["cause"] = "stream_cut"
            rec["detail"] = f"finish_reason seen: {finished}, [DONE] seen: {done}"


def start_probe_stream(load, args, victim_addr):
    """Starts a long stream through nginx that reaches victim_addr; returns once it is streaming."""
    log_path = os.path.join(args.nginx_prefix, "access.log")
    for k in range(200):
        sid = f"probe{k}"
        rec = load.send("chat", "/v1/chat/completions",
                        {"model": "tiny", "messages": [{"role": "user", "content": "hi"}], "max_tokens": 1}, sid, True)
        if rec["ok"] and read_access_log(log_path).get(rec["id"], ("", []))[0] == victim_addr:
            break
    else:
        raise SystemExit(f"scale-out: no session id reached {victim_addr} in 200 tries")
    body = {"model": "tiny", "messages": [{"role": "user", "content": "tell a long story"}], "max_tokens": 1500,
            "stream": True}
    # A random-weight model may end a stream early with its end token: try again until one lasts.
    for _ in range(10):
        streaming = threading.Event()
        t = threading.Thread(target=lambda: load.send("probe_stream", "/v1/chat/completions", body, sid, True,
                                                      on_headers=streaming.set), daemon=True)
        t.start()
        if not streaming.wait(30):
            raise SystemExit("scale-out: the probe stream got no response headers in 30 s")
        time.sleep(0.2)  # a few events have gone through nginx
        if t.is_alive():
            return t
    raise SystemExit("scale-out: 10 probe streams in a row ended within 0.2 s")


def read_access_log(path):
    """X-Request-Id -> (final upstream, every upstream tried), from deploy/nginx's log format."""
    out = {}
    pat = re.compile(r' up=(.*?) ust=.* req="([^"]*)"')
    with open(path, encoding="utf-8", errors="replace") as f:
        for line in f:
            m = pat.search(line)
            if not m or not m.group(2) or m.group(2) == "-":
                continue
            tried = [a for a in re.split(r",\s*", m.group(1)) if a]
            out[m.group(2)] = (tried[-1] if tried else "-", tried)
    return out


def pct(values, p):
    if not values:
        return float("nan")
    v = sorted(values)
    return v[min(len(v) - 1, int(round(p / 100 * (len(v) - 1))))]


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--g4", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--work", required=True)
    ap.add_argument("--ports", required=True, help="comma-separated replica ports")
    ap.add_argument("--nginx-port", type=int, required=True)
    ap.add_argument("--nginx-conf", required=True)
    ap.add_argument("--nginx-prefix", required=True)
    ap.add_argument("--pids", required=True)
    ap.add_argument("--workers", type=int, default=6)
    ap.add_argument("--sessions-per-worker", type=int, default=3)
    ap.add_argument("--request-timeout", type=int, default=60)
    ap.add_argument("--fail-timeout", type=float, default=5)
    ap.add_argument("--phase-seconds", type=float, default=12)
    args = ap.parse_args()

    ports = [int(p) for p in args.ports.split(",")]
    replicas = [Replica(i, p, args) for i, p in enumerate(ports)]
    nginx = None
    violations = []

    def write_pids():
        with open(args.pids, "w") as f:
            for r in replicas:
                if r.alive():
                    f.write(f"{r.proc.pid}\n")
            if nginx is not None and nginx.poll() is None:
                f.write(f"{nginx.pid}\n")

    def stop_all():
        for r in replicas:
            if r.alive():
                r.proc.kill()
                r.proc.wait()
        if nginx is not None and nginx.poll() is None:
            nginx.terminate()
            try:
                nginx.wait(timeout=10)
            except subprocess.TimeoutExpired:
                nginx.kill()

    signal.signal(signal.SIGTERM, lambda *_: sys.exit(1))
    stats = Stats()
    load = Load(args, stats)
    marks = {}
    try:
        t0 = now()
        for r in replicas:
            r.start()
        write_pids()
        for r in replicas:
            r.wait_ready(120)
        nginx = subprocess.Popen(["nginx", "-p", args.nginx_prefix, "-c", args.nginx_conf],
                                 stdout=subprocess.DEVNULL, stderr=open(os.path.join(args.work, "nginx.stderr"), "wb"))
        write_pids()
        if not wait_for_200(args.nginx_port, "/health", nginx, 10):
            raise SystemExit("scale-out: nginx did not come up; see " + os.path.join(args.work, "nginx.stderr"))
        print(f"== scale-out: 3 replicas ready and nginx up in {now() - t0:.1f}s; "
              f"{args.workers} workers, {args.workers // 2 + args.workers % 2} with X-Session-Id", flush=True)

        # Phase 1: steady load, affinity measured.
        load.start()
        time.sleep(args.phase_seconds)

        # Phase 2: rolling update.
        load.phase = "rolling"
        print("== phase rolling: SIGTERM one replica at a time", flush=True)
        for r in replicas:
            t = now()
            r.proc.send_signal(signal.SIGTERM)
            try:
                rc = r.proc.wait(timeout=45)
            except subprocess.TimeoutExpired:
                violations.append(f"rolling: replica {r.idx} did not exit within 45 s of SIGTERM")
                r.proc.kill()
                rc = r.proc.wait()
            if rc != 0:
                violations.append(f"rolling: replica {r.idx} exited {rc} after SIGTERM (expected 0)")
            drained = now() - t
            r.start()
            write_pids()
            r.wait_ready(120)
            print(f"   replica {r.idx} (:{r.port}): drained and exited {rc} in {drained:.1f}s, "
                  f"ready again after {now() - t:.1f}s", flush=True)
            # nginx left it out after its refused connections; wait until it is let back in.
            time.sleep(args.fail_timeout + 0.5)

        # Phase 3: SIGKILL one replica mid-load.
        load.phase = "kill"
        time.sleep(3)
        victim = replicas[1]
        # A long stream on the victim, so that every run sees the kill cut one: a session id that
        # nginx sends there, found with short requests and the access log.
        probe = start_probe_stream(load, args, f"127.0.0.1:{victim.port}")
        marks["kill"] = now()
        victim.proc.kill()
        victim.proc.wait()
        print(f"== phase kill: SIGKILL replica {victim.idx} (:{victim.port})", flush=True)
        write_pids()
        time.sleep(max(6.0, args.phase_seconds / 2))
        load.finish()
        probe.join(timeout=30)
        marks["end"] = now()
    finally:
        load.stop.set()
        stop_all()
        write_pids()  # empty now: nothing left for the shell's trap to end

    # --- verdicts ------------------------------------------------------------------------------
    recs = stats.records
    log = read_access_log(os.path.join(args.nginx_prefix, "access.log"))
    victim_addr = f"127.0.0.1:{replicas[1].port}"
    for r in recs:
        up = log.get(r["id"])
        r["upstream"], r["tried"] = (up if up else (None, []))

    # Affinity in the steady phase: one replica per session.
    home = {}
    for r in recs:
        if r["phase"] == "affinity" and r["affinity"] and r["upstream"]:
            home.setdefault(r["session"], set()).add(r["upstream"])
    for s, ups in sorted(home.items()):
        if len(ups) != 1:
            violations.append(f"affinity: session {s} reached {len(ups)} replicas: {sorted(ups)}")
    home = {s: next(iter(u)) for s, u in home.items() if len(u) == 1}
    if not home:
        violations.append("affinity: no session request completed in the steady phase")

    # Requests without the header: nginx's hash balancer falls back to round robin for an empty key.
    spread = {r["upstream"] for r in recs if r["phase"] == "affinity" and not r["affinity"] and r["upstream"]}
    if len(spread) != len(replicas):
        violations.append(f"affinity: requests without X-Session-Id reached {len(spread)} of {len(replicas)} replicas")

    # Failures by phase and the kill-phase rule.
    accepted_cut = []
    for r in recs:
        if r["ok"] or r["cause"] == "chain_lost":
            continue
        in_flight_on_victim = (r["phase"] == "kill" and r["cause"] == "stream_cut" and r["headers_at"] is not None
                               and r["headers_at"] < marks.get("kill", 0) < r["end"] and r["upstream"] == victim_addr)
        if in_flight_on_victim:
            accepted_cut.append(r)
        else:
            violations.append(f"{r['phase']}: {r['kind']} {r['id']} session {r['session']} failed: {r['cause']} "
                              f"{r.get('detail', '')} (upstream {r['upstream']})")
    for r in recs:
        if r["phase"] == "affinity" and r["affinity"] and r["cause"] == "chain_lost":
            violations.append(f"affinity: session {r['session']} lost its previous_response_id chain on one replica")

    # Kill phase: sessions of the survivors stay; the victim's move, each to one survivor.
    moved = {}
    for r in recs:
        if r["phase"] != "kill" or not r["affinity"] or not r["upstream"] or r["start"] < marks.get("kill", 0):
            continue
        h = home.get(r["session"])
        if h is None:
            continue
        if h != victim_addr:
            if r["upstream"] != h:
                violations.append(f"kill: session {r['session']} of {h} moved to {r['upstream']}")
        else:
            moved.setdefault(r["session"], set()).add(r["upstream"])
    for s, ups in sorted(moved.items()):
        if victim_addr in ups or len(ups) != 1:
            violations.append(f"kill: session {s} of the killed replica reached {sorted(ups)} after the kill")

    # --- report --------------------------------------------------------------------------------
    phases = ["affinity", "rolling", "kill"]
    print()
    print(f"{'phase':<10}{'requests':>9}{'ok':>7}{'failed':>8}{'chains lost (hdr/none)':>24}{'resent by nginx':>17}"
          f"{'p50 ms':>9}{'p95 ms':>9}")
    for ph in phases + ["all"]:
        rs = [r for r in recs if ph == "all" or r["phase"] == ph]
        ok = [r for r in rs if r["ok"]]
        failed = [r for r in rs if not r["ok"] and r["cause"] != "chain_lost"]
        lost_h = sum(1 for r in rs if r["cause"] == "chain_lost" and r["affinity"])
        lost_n = sum(1 for r in rs if r["cause"] == "chain_lost" and not r["affinity"])
        resent = [r for r in rs if len(r["tried"]) > 1]
        lat = [(r["end"] - r["start"]) * 1000 for r in ok]
        print(f"{ph:<10}{len(rs):>9}{len(ok):>7}{len(failed):>8}{f'{lost_h}/{lost_n}':>24}{len(resent):>17}"
              f"{pct(lat, 50):>9.0f}{pct(lat, 95):>9.0f}")
    causes = {}
    for r in recs:
        if not r["ok"] and r["cause"] != "chain_lost":
            causes[r["cause"]] = causes.get(r["cause"], 0) + 1
    print("failures by cause:", ", ".join(f"{k} {v}" for k, v in sorted(causes.items())) or "none",
          f"(accepted: {len(accepted_cut)} streams cut on the killed replica)")
    print()
    print(f"{'replica':<22}{'requests':>9}{'sessions (affinity phase)':>27}")
    for rep in replicas:
        addr = f"127.0.0.1:{rep.port}"
        n = sum(1 for r in recs if r["upstream"] == addr)
        ns = sum(1 for h in home.values() if h == addr)
        print(f"{addr + (' (killed)' if rep is replicas[1] else ''):<22}{n:>9}{ns:>27}")
    print()
    print("prefix cache, affinity phase (cached prompt tokens / prompt tokens):")
    for aff in (True, False):
        rs = [r for r in recs if r["phase"] == "affinity" and r["ok"] and r["affinity"] == aff and r["prompt"]]
        p = sum(r["prompt"] for r in rs)
        c = sum(r["cached"] for r in rs)
        lost = sum(1 for r in recs if r["phase"] == "affinity" and r["affinity"] == aff and r["cause"] == "chain_lost")
        label = "with X-Session-Id   " if aff else "without (round robin)"
        print(f"  {label} {100 * c / max(1, p):5.1f}% of {p} tokens; previous_response_id chains lost: {lost}")
    probes = [r for r in recs if r["kind"] == "probe_stream"]
    cut = [r for r in probes if r in accepted_cut]
    print(f"long stream on the killed replica: {'cut by the kill (accepted)' if cut else 'NOT cut'}; "
          f"{len(probes) - len(cut)} earlier tries ended by themselves")
    if not cut:
        violations.append("kill: the long stream on the killed replica was not cut: the kill phase tested nothing")
    print(f"sessions of the killed replica moved: {len(moved)}, each to one survivor; "
          f"the others' sessions stayed on their replica")
    print()
    if violations:
        print(f"== scale-out FAILED: {len(violations)} violation(s)", file=sys.stderr)
        for v in violations[:30]:
            print("   " + v, file=sys.stderr)
        return 1
    print(f"== scale-out passed in {marks['end'] - t0:.0f}s")
    return 0


if __name__ == "__main__":
    sys.exit(main())

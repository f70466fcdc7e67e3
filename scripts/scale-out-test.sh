#!/usr/bin/env bash
# Scale-out test: three `g4 serve` replicas of a random-weight tiny-e model behind nginx, all on
# 127.0.0.1, with the configuration deploy/nginx/render.sh writes for users. Under a mixed load
# (streamed and non-streamed chat completions with shared prefixes, /v1/responses chains with
# previous_response_id, sessions with and without X-Session-Id) it checks session affinity, a
# rolling update by SIGTERM with zero failed requests, and failover after a SIGKILL; the rules
# are stated at the top of scripts/scale_out_driver.py, the recipe in docs/deploy.md.
#   scripts/scale-out-test.sh          (uses build/g4, or $G4_BINARY; builds it when missing)
#   G4_SCALE_OUT_PHASE_S=12 (seconds of steady load), G4_SCALE_OUT_WORKERS=6 (concurrent clients),
#   G4_SCALE_OUT_KEEP=1 keeps the work directory (logs, nginx.conf, access.log) for inspection.
# Installs nginx (and python3) from Debian packages when missing. Exits non-zero on any violation.
set -euo pipefail
cd "$(dirname "$0")/.."
G4="${G4_BINARY:-${G4_BUILD_DIR:-build}/g4}"

missing=()
command -v nginx >/dev/null 2>&1 || [ -x /usr/sbin/nginx ] || missing+=(nginx)
command -v python3 >/dev/null 2>&1 || missing+=(python3)
if [ ${#missing[@]} -gt 0 ]; then
  SUDO=""
  [ "$(id -u)" -ne 0 ] && SUDO="sudo"
  echo "scale-out: installing ${missing[*]}"
  $SUDO apt-get update -qq
  # The test uses only the binary: it runs its own nginx on a loopback port with its own prefix,
  # whatever the package's system service does.
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq --no-install-recommends "${missing[@]}"
fi
export PATH="$PATH:/usr/sbin"
[ -x "$G4" ] || scripts/build.sh g4

WORK="$(mktemp -d "${TMPDIR:-/tmp}/g4-scale-out.XXXXXX")"
cleanup() {
  # The driver ends its replicas and nginx itself; these are the ids it wrote down, for when it
  # was killed before it could.
  if [ -f "$WORK/pids" ]; then
    while read -r pid; do
      [ -n "$pid" ] && kill -KILL "$pid" 2>/dev/null || true
    done <"$WORK/pids"
  fi
  if [ "${G4_SCALE_OUT_KEEP:-0}" = 1 ]; then echo "scale-out: work directory kept: $WORK"; else rm -rf "$WORK"; fi
}
trap cleanup EXIT

"$G4" synth --preset tiny-e --seed 7 --out "$WORK/model" >"$WORK/synth.log" 2>&1 ||
  { cat "$WORK/synth.log" >&2; echo "scale-out: g4 synth failed" >&2; exit 1; }

# nginx's configuration names the replicas' ports before they start, and a replica restarted in the
# rolling update must get its port back, so the ports are chosen here (free at this moment: the
# kernel's choice for port 0) rather than by `g4 serve --port 0`.
read -r P1 P2 P3 PN < <(python3 - <<'PY'
import socket
socks = [socket.socket() for _ in range(4)]
for s in socks:
    s.bind(("127.0.0.1", 0))
print(*(s.getsockname()[1] for s in socks))
PY
)
REQUEST_TIMEOUT=60
FAIL_TIMEOUT=5
mkdir -p "$WORK/nginx"
deploy/nginx/render.sh --standalone "$WORK/nginx" --listen "127.0.0.1:$PN" --request-timeout "$REQUEST_TIMEOUT" \
  --fail-timeout "$FAIL_TIMEOUT" "$P1" "$P2" "$P3" >"$WORK/nginx/nginx.conf"
nginx -t -q -p "$WORK/nginx" -c "$WORK/nginx/nginx.conf" ||
  { echo "scale-out: nginx refused the rendered configuration ($WORK/nginx/nginx.conf)" >&2; exit 1; }
echo "== scale-out: replicas on 127.0.0.1:$P1,$P2,$P3, nginx on 127.0.0.1:$PN ($(nginx -v 2>&1 | sed 's/.*: //'))"

rc=0
python3 scripts/scale_out_driver.py --g4 "$G4" --model "$WORK/model" --work "$WORK" --ports "$P1,$P2,$P3" \
  --nginx-port "$PN" --nginx-conf "$WORK/nginx/nginx.conf" --nginx-prefix "$WORK/nginx" --pids "$WORK/pids" \
  --request-timeout "$REQUEST_TIMEOUT" --fail-timeout "$FAIL_TIMEOUT" \
  --workers "${G4_SCALE_OUT_WORKERS:-6}" --phase-seconds "${G4_SCALE_OUT_PHASE_S:-12}" || rc=$?
if [ "$rc" -ne 0 ]; then
  echo "scale-out: failed (driver exit $rc); nginx error log tail:" >&2
  tail -n 5 "$WORK/nginx/error.log" >&2 2>/dev/null || true
fi
exit "$rc"

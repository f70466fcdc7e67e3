#!/usr/bin/env bash
# Writes the nginx configuration for N `g4 serve` replicas to stdout, from g4.conf.in beside it,
# so that scripts/scale-out-test.sh and a deployment run the same configuration.
#   deploy/nginx/render.sh [options] REPLICA...      REPLICA: HOST:PORT, or PORT for 127.0.0.1:PORT
#     --listen ADDR:PORT     where nginx listens (default 127.0.0.1:8080)
#     --max-body BYTES       g4's --max-body (default 8388608, g4's default)
#     --request-timeout S    g4's --request-timeout (default 600, g4's default); nginx waits 60 s longer
#     --fail-timeout S       how long a replica that failed is left out (default 5)
#     --access-log PATH      default /var/log/nginx/g4.access.log
#     --standalone DIR       a whole nginx.conf for `nginx -p DIR -c FILE` as any user: pid, logs
#                            and temporary files under DIR, in the foreground (daemon off)
# Without --standalone the output is an http-context file: /etc/nginx/conf.d/g4.conf on Debian.
set -euo pipefail
HERE="$(cd "$(dirname "$0")" && pwd)"
listen="127.0.0.1:8080"
max_body=8388608
request_timeout=600
fail_timeout=5
access_log=/var/log/nginx/g4.access.log
standalone=""
replicas=()
need() { [ "$#" -ge 2 ] || { echo "render.sh: $1 needs a value" >&2; exit 2; }; }
while [ "$#" -gt 0 ]; do
  case "$1" in
    --listen) need "$@"; listen="$2"; shift 2 ;;
    --max-body) need "$@"; max_body="$2"; shift 2 ;;
    --request-timeout) need "$@"; request_timeout="$2"; shift 2 ;;
    --fail-timeout) need "$@"; fail_timeout="$2"; shift 2 ;;
    --access-log) need "$@"; access_log="$2"; shift 2 ;;
    --standalone) need "$@"; standalone="$2"; shift 2 ;;
    -h|--help) sed -n '2,12p' "$0" | sed 's/^# \{0,1\}//'; exit 0 ;;
    -*) echo "render.sh: unknown option $1" >&2; exit 2 ;;
    *) replicas+=("$1"); shift ;;
  esac
done
[ "${#replicas[@]}" -gt 0 ] || { echo "render.sh: name at least one replica (HOST:PORT or PORT)" >&2; exit 2; }
for v in "$max_body" "$request_timeout" "$fail_timeout"; do
  [[ "$v" =~ ^[0-9]+$ ]] || { echo "render.sh: '$v' is not a whole number" >&2; exit 2; }
done

servers=""
for r in "${replicas[@]}"; do
  [[ "$r" =~ ^[0-9]+$ ]] && r="127.0.0.1:$r"
  [[ "$r" =~ ^[^[:space:]\;]+:[0-9]+$ ]] || { echo "render.sh: '$r' is not HOST:PORT" >&2; exit 2; }
  # max_fails=1: one refused connection or 503 takes a replica out for fail_timeout, so that a
  # draining or dead replica costs at most one extra attempt per fail_timeout.
  servers+="    server $r max_fails=1 fail_timeout=${fail_timeout}s;"$'\n'
done
if [ -n "$standalone" ]; then
  standalone="$(cd "$standalone" && pwd)"
  [ "$access_log" = /var/log/nginx/g4.access.log ] && access_log="$standalone/access.log"
fi

# Every replica may be tried once (@TRIES@); nginx's read timeout is 60 s past g4's deadline.
# Bash substitution, not sed: the server list spans lines. patsub_replacement (bash 5.2) would
# read '&' in a value as the matched text.
shopt -u patsub_replacement 2>/dev/null || true
body="$(<"$HERE/g4.conf.in")"
body="${body//@SERVERS@/${servers%$'\n'}}"
body="${body//@LISTEN@/$listen}"
body="${body//@MAX_BODY@/$max_body}"
body="${body//@REQUEST_TIMEOUT@/$request_timeout}"
body="${body//@READ_TIMEOUT@/$((request_timeout + 60))}"
body="${body//@TRIES@/${#replicas[@]}}"
body="${body//@ACCESS_LOG@/$access_log}"
if grep -q '@[A-Z_]*@' <<<"$body"; then
  echo "render.sh: g4.conf.in has a field render.sh does not fill: $(grep -o '@[A-Z_]*@' <<<"$body" | head -1)" >&2
  exit 1
fi

if [ -z "$standalone" ]; then
  printf '%s\n' "$body"
  exit 0
fi
# nginx as root switches its workers to `nobody`, which could not write the temporary files below.
user_line=""
[ "$(id -u)" -eq 0 ] && user_line="user root;"
cat <<CONF
# Standalone: nginx -p $standalone -c FILE (rendered by deploy/nginx/render.sh)
$user_line
daemon off;
worker_processes 1;
pid $standalone/nginx.pid;
error_log $standalone/error.log warn;
events { worker_connections 1024; }
http {
    client_body_temp_path $standalone/client_body;
    proxy_temp_path $standalone/proxy;
    fastcgi_temp_path $standalone/fastcgi;
    uwsgi_temp_path $standalone/uwsgi;
    scgi_temp_path $standalone/scgi;
$(sed 's/^/    /' <<<"$body")
}
CONF

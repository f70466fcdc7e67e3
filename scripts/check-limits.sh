#!/usr/bin/env bash
# Fails when a file under src/ exceeds 500 lines or a function 80 (docs/design.md, Code shape).
# Function extents come from universal-ctags (installed by scripts/install-deps.sh); a lambda
# counts toward the function that holds it.
set -euo pipefail
cd "$(dirname "$0")/.."
status=0
while read -r n f; do
  [ "$f" = total ] && continue
  if [ "$n" -gt 500 ]; then echo "check-limits: $f has $n lines (limit 500)"; status=1; fi
done < <(find src -name '*.cpp' -o -name '*.h' | xargs wc -l)
long="$(ctags -R --languages=C++ --kinds-C++=f --fields=+ne -x --_xformat='%F|%n|%e|%N' src |
  awk -F'|' '$3 != "" { n = $3 - $2 + 1; if (n > 80) print "check-limits: " $1 ":" $2 " " $4 " has " n " lines (limit 80)" }')"
if [ -n "$long" ]; then echo "$long"; status=1; fi
[ $status -eq 0 ] && echo "check-limits: every file under src/ <= 500 lines, every function <= 80"
exit $status

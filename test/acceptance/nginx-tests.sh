#!/usr/bin/env bash
# nginx's own test suite (../shared/conformance) against bin/jinx, for CI:
# runs the files of one group of scope.txt (tier1 by default), prints the
# runner's table, then fails if any assertion listed in
# test/acceptance/nginx-tests-ratchet.txt did not pass. Lines of the ratchet
# are "FILE :: NAME", NAME as the TAP output names the assertion; a name that
# occurs more than once in a file must pass every time.
#
#   test/acceptance/nginx-tests.sh [--tier T] [--update]
#
# --update adds every assertion that passed in this run to the ratchet (it
# only grows). Installs the suite's Perl modules when they are missing (root,
# apt-get).
set -uo pipefail
cd "$(dirname "$0")/../.."
tier=tier1
update=0
while [ $# -gt 0 ]; do
  case "$1" in
    --tier) tier=$2; shift 2 ;;
    --update) update=1; shift ;;
    *) echo "usage: $0 [--tier T] [--update]" >&2; exit 2 ;;
  esac
done
conformance=../shared/conformance
ratchet=test/acceptance/nginx-tests-ratchet.txt
if ! perl -MFCGI -MProtocol::WebSocket -MIO::Socket::SSL -e1 2>/dev/null; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null; then
    DEBIAN_FRONTEND=noninteractive apt-get install -y -q libfcgi-perl libprotocol-websocket-perl libio-socket-ssl-perl >/dev/null \
      || { echo "nginx-tests: could not install the suite's Perl modules" >&2; exit 1; }
  else
    echo "nginx-tests: the suite's Perl modules are missing (apt-get install libfcgi-perl libprotocol-websocket-perl libio-socket-ssl-perl)" >&2
    exit 1
  fi
fi
keep=$(mktemp -d /tmp/jinx-nginx-tests-XXXXXX)
trap 'rm -rf "$keep"' EXIT
"$conformance/run" --list "$conformance/scope.txt" --tier "$tier" --keep "$keep" bin/jinx 2>/dev/null
# every assertion of the run as "FILE :: NAME<TAB>ok|not ok"
results=$(for tap in "$keep"/*.tap; do
  file=$(basename "$tap" .tap).t
  sed -n -E 's/^(ok|not ok) [0-9]+( - (.*))?$/\1\t\3/p' "$tap" | awk -F'\t' -v f="$file" '{ sub(/ # (TODO|SKIP).*$/, "", $2); print f " :: " $2 "\t" $1 }'
done)
if [ "$update" = 1 ]; then
  passed=$(printf '%s\n' "$results" | awk -F'\t' '{ st[$1] = (st[$1] == "" || st[$1] == "ok") && $2 == "ok" ? "ok" : "no" } END { for (k in st) if (st[k] == "ok") print k }')
  { grep -v '^#' "$ratchet" 2>/dev/null; printf '%s\n' "$passed"; } | grep -v '^$' | sort -u > "$ratchet.new"
  { echo "# nginx-tests assertions jinx passes: FILE :: NAME (test/acceptance/nginx-tests.sh --update adds to it; never remove a line)"; cat "$ratchet.new"; } > "$ratchet"
  rm -f "$ratchet.new"
  echo "nginx-tests: $(grep -vc '^#' "$ratchet") assertions in $ratchet"
fi
failed=0
while IFS= read -r line; do
  case "$line" in ''|'#'*) continue ;; esac
  outcomes=$(printf '%s\n' "$results" | awk -F'\t' -v k="$line" '$1 == k { print $2 }')
  if [ -z "$outcomes" ] || printf '%s\n' "$outcomes" | grep -q '^not ok$'; then
    echo "nginx-tests ratchet: required assertion failed or missing: $line" >&2
    failed=1
  fi
done < "$ratchet"
[ "$failed" = 0 ] || exit 1
echo "nginx-tests: ok"

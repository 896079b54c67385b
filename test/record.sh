#!/bin/sh
# Re-records nginx's answers that tests compare jinx with when no reference
# nginx is installed (test/DIR/FOO.recorded.json, see test/helpers/recorded.ts):
# builds, then runs the given test files (test/DIR/FOO.test.ts, or every test
# file) with JINX_RECORD=1 against the reference nginx 1.30.
#   npm run -s record                                  every test file
#   npm run -s record -- test/runtime/proxy.test.ts    one file
set -e
if [ "$JINX_NO_NGINX" = 1 ] || [ ! -x /opt/nginx-oracle/nginx ]; then
  echo "test/record.sh: recording needs the reference nginx 1.30 in /opt/nginx-oracle (test/prepare.sh installs it as root)" >&2
  exit 1
fi
npm run -s build
if [ $# -eq 0 ]; then
  set -- $(find dist/test -name '*.test.js' | sort)
else
  for f in "$@"; do
    shift
    set -- "$@" "dist/$(echo "$f" | sed 's/^dist\///; s/\.ts$/.js/')"
  done
fi
JINX_RECORD=1 exec node --test --test-concurrency=1 --test-timeout=1200000 "$@"

#!/bin/sh
# Installs what the tests need when it is missing: the reference nginx
# (Debian's, and current nginx into /opt/nginx-oracle when the installer is
# available), curl, openssl, php-fpm, uWSGI with its python3 plugin, memcached, iproute2 (the config fuzzer's
# sandbox brings its loopback interface up with ip) and prometheus (its
# promtool checks stub_status's Prometheus page). Safe to run again.
set -e
need=""
command -v curl >/dev/null 2>&1 || need="$need curl"
command -v openssl >/dev/null 2>&1 || need="$need openssl"
command -v ip >/dev/null 2>&1 || need="$need iproute2"
[ -x /usr/sbin/nginx ] || need="$need nginx"
ls /usr/sbin/php-fpm* >/dev/null 2>&1 || need="$need php-fpm"
[ -x /usr/bin/uwsgi-core ] || need="$need uwsgi-core"
[ -f /usr/lib/uwsgi/plugins/python3_plugin.so ] || need="$need uwsgi-plugin-python3"
[ -x /usr/bin/memcached ] || need="$need memcached"
command -v promtool >/dev/null 2>&1 || need="$need prometheus"
if [ -n "$need" ]; then
  if [ "$(id -u)" = 0 ] && command -v apt-get >/dev/null 2>&1; then
    echo "test/prepare.sh: installing$need" >&2
    (apt-get install -y -q $need >/dev/null 2>&1 || { apt-get update -q >/dev/null 2>&1 && apt-get install -y -q $need >/dev/null; }) \
      || echo "test/prepare.sh: could not install$need; tests that need them are skipped (without nginx, tests compare with its recorded answers)" >&2
  else
    echo "test/prepare.sh: missing$need (not root or no apt-get); tests that need them are skipped (without nginx, tests compare with its recorded answers)" >&2
  fi
fi
oracle=../shared/tools/install-nginx-oracle
if [ ! -x /opt/nginx-oracle/nginx ] && [ -x "$oracle" ] && [ "$(id -u)" = 0 ]; then
  "$oracle" >/dev/null 2>&1 || echo "test/prepare.sh: could not install the reference nginx 1.30; differential tests use Debian's nginx" >&2
fi
exit 0

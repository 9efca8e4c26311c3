#!/usr/bin/env bash
# deps.sh PURPOSE: make sure the Debian packages that PURPOSE (build, test, demo,
# bench, fuzz) needs are installed. As root, installs what is missing with apt-get;
# otherwise prints the exact command to run and fails.
set -euo pipefail

purpose=${1:-build}
pkgs=(gcc make pkg-config libpq-dev libmicrohttpd-dev libjson-c-dev libzstd-dev
      libcurl4-openssl-dev zlib1g-dev libdw-dev libelf-dev libdebuginfod-dev libunwind-dev
      protobuf-c-compiler libprotobuf-c-dev)
case "$purpose" in
build) ;;
test) pkgs+=(postgresql postgresql-common postgresql-contrib curl zstd procps debuginfod libc6-dbg python3-scipy python3-numpy python3-protobuf protobuf-compiler chromium fonts-dejavu-core
      redis-server redis-tools nginx-light wrk binutils dpkg-dev lintian ansible openssh-server openssh-client iproute2
      haproxy patroni etcd-server etcd-client) ;;
demo) pkgs+=(postgresql postgresql-common curl procps redis-server redis-tools) ;;
bench) pkgs+=(postgresql postgresql-common postgresql-contrib curl zstd procps time python3-scipy python3-numpy wrk
       redis-server redis-tools nginx-light) ;;
fuzz) pkgs+=(clang) ;;
deb) pkgs+=(dpkg-dev lintian) ;;
*) echo "deps.sh: unknown purpose '$purpose' (build, test, demo, bench, fuzz, deb)" >&2; exit 2 ;;
esac

# the browser tests run playwright-core on Node.js; a node from elsewhere
# (nodesource, nvm) that brings its own npm serves as well as Debian's
if [ "$purpose" = test ] && ! { command -v node && command -v npm; } >/dev/null 2>&1; then
	pkgs+=(nodejs npm)
fi

missing=()
for p in "${pkgs[@]}"; do
	st=$(dpkg-query -W -f='${Status}' "$p" 2>/dev/null || true)
	[ "$st" = "install ok installed" ] || missing+=("$p")
done
[ ${#missing[@]} -eq 0 ] && exit 0

if [ "$(id -u)" -ne 0 ]; then
	echo "stackmine needs these Debian packages: ${missing[*]}" >&2
	echo "install them with: sudo apt-get install -y ${missing[*]}" >&2
	exit 1
fi
echo "deps.sh: installing ${missing[*]}" >&2
export DEBIAN_FRONTEND=noninteractive
# a fresh machine has no package lists yet; refresh them once a day at most
if [ -z "$(find /var/lib/apt/lists -maxdepth 1 -name '*Packages*' -mtime -1 2>/dev/null | head -n 1)" ]; then
	apt-get update -qq
fi
# the servers the tests run (postgresql, redis, nginx) must not start as system
# services on install: the tests start their own, on ports of their choosing
policy=
if [ ! -e /usr/sbin/policy-rc.d ]; then
	policy=/usr/sbin/policy-rc.d
	printf '#!/bin/sh\nexit 101\n' >"$policy"
	chmod 755 "$policy"
	trap 'rm -f "$policy"' EXIT
fi
apt-get install -y -qq --no-install-recommends "${missing[@]}" >&2

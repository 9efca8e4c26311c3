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
      haproxy patroni etcd-server etcd-client strace) ;;
demo) pkgs+=(postgresql postgresql-common curl procps redis-server redis-tools) ;;
bench) pkgs+=(postgresql postgresql-common postgresql-contrib curl zstd procps time python3-scipy python3-numpy wrk
       redis-server redis-tools nginx-light valgrind) ;;
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

# Another program using the package manager (unattended-upgrades, cloud-init, an apt-get in another
# shell) holds its locks, and apt-get would fail at once: wait for them instead, up to
# SM_APT_LOCK_WAIT seconds (300), saying so once. apt-get install waits by itself with
# DPkg::Lock::Timeout, but apt-get update does not for the lists lock: the locks are looked up
# here, as /proc/locks lists them (fcntl locks, by inode), before each.
lock_wait=${SM_APT_LOCK_WAIT:-300}
lock_holder() { # lock_holder FILE...: "PID (NAME)" of a process holding one of the files' locks
	local f ino pid
	for f; do
		[ -e "$f" ] || continue
		ino=$(stat -c %i "$f")
		# "1: POSIX ADVISORY WRITE PID MAJ:MIN:INODE 0 EOF" (a waiter's line has a "->" more)
		pid=$(awk -v ino="$ino" '{ for (i = 2; i <= NF; i++) if ($i ~ /^[0-9a-f]+:[0-9a-f]+:[0-9]+$/) {
			split($i, d, ":"); if (d[3] == ino) { print $(i - 1); exit } } }' /proc/locks)
		[ -n "$pid" ] || continue
		echo "$pid ($(cat "/proc/$pid/comm" 2>/dev/null || echo '?'))"
		return 0
	done
	return 1
}
wait_for_locks() { # wait_for_locks FILE...
	local who deadline=$((SECONDS + lock_wait)) said=
	while who=$(lock_holder "$@"); do
		if [ -z "$said" ]; then
			echo "deps.sh: waiting up to ${lock_wait} s for the package manager, in use by process $who" >&2
			said=1
		fi
		[ $SECONDS -lt $deadline ] || { echo "deps.sh: the package manager is still in use by process $who" >&2; return 0; }
		sleep 1
	done
}
dpkg_locks=(/var/lib/dpkg/lock-frontend /var/lib/dpkg/lock /var/cache/apt/archives/lock)

# a fresh machine has no package lists yet; refresh them once a day at most
if [ -z "$(find /var/lib/apt/lists -maxdepth 1 -name '*Packages*' -mtime -1 2>/dev/null | head -n 1)" ]; then
	wait_for_locks /var/lib/apt/lists/lock
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
wait_for_locks "${dpkg_locks[@]}"
apt-get install -y -qq -o DPkg::Lock::Timeout="$lock_wait" --no-install-recommends "${missing[@]}" >&2

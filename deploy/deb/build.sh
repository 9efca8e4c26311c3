#!/usr/bin/env bash
# deb/build.sh [OUTDIR]: the Debian packages of stackmine, built with dpkg-deb
# from what `make binaries` left in bin/ and lib/ (make deb runs both):
#
#   stackmine-agent   sm-agent, sm-guard, /usr/lib/stackmine/libsmguard.so,
#                     /etc/stackmine/agent.conf, the spool /var/spool/stackmine,
#                     the system user stackmine
#   stackmine-server  sm-ingest, sm-web, sm-miner, sm-cluster, sm-admin, their
#                     systemd units, /etc/stackmine/stackmine.conf
#
# The version is deploy/deb/VERSION's (SM_DEB_VERSION overrides it: the upgrade
# test builds a second one). Depends: the library packages dpkg-shlibdeps finds
# for the ELF files, plus adduser. The maintainer scripts are in deploy/deb/.
set -euo pipefail

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/../.." && pwd -P)
out=${1:-$repo/build/deb}
version=${SM_DEB_VERSION:-$(cat "$repo/deploy/deb/VERSION")}
arch=$(dpkg --print-architecture)
maint="stackmine developers <packages@stackmine.dev>"
work=$(mktemp -d)
trap 'rm -rf "$work"' EXIT

for f in bin/sm-agent bin/sm-guard bin/sm-ingest bin/sm-web bin/sm-miner bin/sm-cluster bin/sm-admin lib/libsmguard.so; do
	[ -x "$repo/$f" ] || [ -f "$repo/$f" ] || { echo "deb: $f is missing: run make binaries first" >&2; exit 1; }
done
mkdir -p "$out"

# stage PKG: an empty package tree with its documentation
stage() {
	local pkg=$1 root=$work/$1
	mkdir -p "$root/DEBIAN" "$root/usr/share/doc/$pkg"
	install -m 644 "$repo/deploy/deb/copyright" "$root/usr/share/doc/$pkg/copyright"
	printf '%s (%s) stable; urgency=medium\n\n  * Release %s.\n\n -- %s  %s\n' \
		"$pkg" "$version" "$version" "$maint" "$(date -R -d @"${SOURCE_DATE_EPOCH:-0}")" |
		gzip -9n >"$root/usr/share/doc/$pkg/changelog.gz"
	chmod 644 "$root/usr/share/doc/$pkg/changelog.gz"
}

# depends ROOT FILE...: the shared-library dependencies of the ELF files, as dpkg-shlibdeps names them
depends() {
	local root=$1 d
	shift
	d=$(mktemp -d)
	mkdir -p "$d/debian"
	printf 'Source: stackmine\n\nPackage: x\nArchitecture: any\n' >"$d/debian/control"
	(cd "$d" && dpkg-shlibdeps -O "${@/#/$root/}" 2>/dev/null) | sed -n 's/^shlibs:Depends=//p'
	rm -rf "$d"
}

# lazy_depends DEPENDS: DEPENDS and the packages of the libraries libsmguard.so loads itself when
# it needs them (dlopen: agent/guard/lazy.c and unwind.c), which dpkg-shlibdeps cannot see; their
# sonames are the ones the build recorded (build/rel/gen/guard_sonames.h)
lazy_depends() {
	local deps=$1 so pkg
	for so in $(sed -n 's/^#define SONAME_[A-Z_]* "\(.*\)"$/\1/p' "$repo/build/rel/gen/guard_sonames.h"); do
		pkg=$(dpkg -S "*/$so" 2>/dev/null | head -n 1 | cut -d: -f1)
		[ -n "$pkg" ] || { echo "deb: no installed package has $so" >&2; exit 1; }
		[[ ", $deps" == *", $pkg "* || ", $deps," == *", $pkg,"* ]] || deps+=", $pkg"
	done
	echo "$deps"
}

# control ROOT PKG DESCRIPTION DEPENDS
control() {
	local root=$1 pkg=$2 desc=$3 deps=$4 size
	size=$(du -sk --exclude=DEBIAN "$root" | cut -f1)
	cat >"$root/DEBIAN/control" <<EOF
Package: $pkg
Version: $version
Architecture: $arch
Maintainer: $maint
Installed-Size: $size
Depends: $deps
Section: devel
Priority: optional
Homepage: https://stackmine.invalid/
Description: $desc
EOF
}

# ---- stackmine-agent ----
a=$work/stackmine-agent
stage stackmine-agent
install -D -m 755 "$repo/bin/sm-agent" "$a/usr/bin/sm-agent"
install -D -m 755 "$repo/bin/sm-guard" "$a/usr/bin/sm-guard"
install -D -m 644 "$repo/lib/libsmguard.so" "$a/usr/lib/stackmine/libsmguard.so"
install -D -m 644 "$repo/deploy/deb/agent.conf" "$a/etc/stackmine/agent.conf"
install -D -m 644 "$repo/deploy/systemd/sm-agent-collect.service" "$a/lib/systemd/system/sm-agent-collect.service"
printf '/etc/stackmine/agent.conf\n' >"$a/DEBIAN/conffiles"
for s in postinst prerm postrm; do
	install -m 755 "$repo/deploy/deb/agent.$s" "$a/DEBIAN/$s"
done
strip --strip-unneeded "$a/usr/bin/sm-agent" "$a/usr/bin/sm-guard" "$a/usr/lib/stackmine/libsmguard.so"
control "$a" stackmine-agent "stackmine guard agent: finds slow units of work in running programs
 The guard agent (libsmguard.so, loaded with LD_PRELOAD; sm-guard runs a
 program with it or writes a systemd drop-in that guards a service) learns
 how long each kind of unit of work takes in an unmodified program and,
 when one takes longer than it should, ships its call stacks and waits to
 sm-ingest. sm-agent imports perf captures and ships or spools streams." \
	"$(lazy_depends "adduser, $(depends "$a" usr/bin/sm-agent usr/bin/sm-guard usr/lib/stackmine/libsmguard.so)")"

# ---- stackmine-server ----
s=$work/stackmine-server
stage stackmine-server
for b in sm-ingest sm-web sm-miner sm-cluster sm-admin; do
	install -D -m 755 "$repo/bin/$b" "$s/usr/bin/$b"
	strip --strip-unneeded "$s/usr/bin/$b"
done
for u in sm-ingest sm-web sm-miner-worker; do
	sed 's|/usr/local/bin/|/usr/bin/|g' "$repo/deploy/systemd/$u.service" >"$work/$u.service"
	install -D -m 644 "$work/$u.service" "$s/lib/systemd/system/$u.service"
done
install -D -m 644 "$repo/deploy/stackmine.conf.example" "$s/etc/stackmine/stackmine.conf"
printf '/etc/stackmine/stackmine.conf\n' >"$s/DEBIAN/conffiles"
for x in postinst prerm postrm; do
	install -m 755 "$repo/deploy/deb/server.$x" "$s/DEBIAN/$x"
done
control "$s" stackmine-server "stackmine backend: ingest, mining, clustering and the dashboard
 sm-ingest receives trace streams from guard agents and stores them in
 PostgreSQL; sm-miner mines the costly call-stack patterns of slow units
 and clusters them; sm-web serves the dashboard and the REST API; sm-admin
 migrates the schema and manages tokens and retention." \
	"adduser, $(depends "$s" usr/bin/sm-ingest usr/bin/sm-web usr/bin/sm-miner usr/bin/sm-cluster usr/bin/sm-admin)"

for p in stackmine-agent stackmine-server; do
	dpkg-deb --root-owner-group -Zxz --build "$work/$p" "$out/${p}_${version}_$arch.deb" >/dev/null
	echo "$out/${p}_${version}_$arch.deb"
done

#!/usr/bin/env bash
# deb: the Debian packages (make deb, deploy/deb/). Builds them twice (two
# versions) from the release binaries, checks them with lintian (no error), then,
# on a host of its own (an overlay over this machine's root in a private mount
# namespace, so that nothing it installs is seen outside), installs both,
# checks what the maintainer scripts made (the system user, modes, the spool,
# the library sm-guard finds, units that systemd-analyze verify accepts),
# upgrades them keeping a changed configuration file, and purges them: nothing
# of stackmine stays but the system user (Debian policy).
export SM_TEST_FRESH_DB=0
. "$(dirname "$0")/../lib.sh"

[ "$(id -u)" = 0 ] || t_bail "root" "installing packages on an overlay host needs root"
command -v lintian >/dev/null || t_bail "lintian" "lintian is missing: deploy/deps.sh test installs it"
build_debs 1.0.0 1.0.1
t_eq "four packages built" "$(cd "$T_TMP/deb" && ls)" "stackmine-agent_1.0.0_${arch}.deb
stackmine-agent_1.0.1_${arch}.deb
stackmine-server_1.0.0_${arch}.deb
stackmine-server_1.0.1_${arch}.deb"
t_match "agent: depends on the libraries it links" \
	"$(dpkg-deb -f "$T_TMP/deb/stackmine-agent_1.0.1_$arch.deb" Depends)" '^adduser, libc6 .*libdw1 .*libunwind8'
t_match "server: depends on the libraries it links" \
	"$(dpkg-deb -f "$T_TMP/deb/stackmine-server_1.0.1_$arch.deb" Depends)" '^adduser, libc6 .*libmicrohttpd12 .*libpq5'
t_eq "agent: its files" "$(dpkg-deb -c "$T_TMP/deb/stackmine-agent_1.0.1_$arch.deb" | awk '$1 !~ /^d/ {print $1, $2, $6}')" \
"-rw-r--r-- root/root ./etc/stackmine/agent.conf
-rw-r--r-- root/root ./lib/systemd/system/sm-agent-collect.service
-rwxr-xr-x root/root ./usr/bin/sm-agent
-rwxr-xr-x root/root ./usr/bin/sm-guard
-rw-r--r-- root/root ./usr/lib/stackmine/libsmguard.so
-rw-r--r-- root/root ./usr/share/doc/stackmine-agent/changelog.gz
-rw-r--r-- root/root ./usr/share/doc/stackmine-agent/copyright"
lintian --tag-display-limit 0 "$T_TMP"/deb/*_1.0.1_*.deb >"$T_TMP/lintian.out" 2>&1
t_eq "lintian: no error" "$(grep '^E:' "$T_TMP/lintian.out")" ""
t_eq "lintian: no warning but the missing manual pages" "$(grep '^W:' "$T_TMP/lintian.out" | grep -v no-manual-page)" ""

# host CMD: runs CMD (sh) as root on the overlay host
host() {
	unshare --mount --fork sh -c '
		h=$1; shift
		mount -t tmpfs tmpfs "$h" && mkdir -p "$h/u" "$h/w" "$h/m" &&
		mount -t overlay overlay -o "lowerdir=/,upperdir=$h/u,workdir=$h/w" "$h/m" &&
		mount --bind /proc "$h/m/proc" && mount --bind /dev "$h/m/dev" && mkdir -p "$h/m/pkgs" &&
		cp "$0"/*.deb "$h/m/pkgs/" && chroot "$h/m" sh -c "$1" && cd "$h/u" &&
		find . -path ./pkgs -prune -o -path ./var/lib/dpkg -prune -o -path ./var/cache -prune -o \
			-path ./var/log -prune -o -path ./run -prune -o -path ./tmp -prune -o ! -type d -print |
			sort >"$2"' \
		"$T_TMP/deb" "$T_TMP/host" "$1" "$T_TMP/left"
}
mkdir -p "$T_TMP/host"

script='set -e
dpkg -i /pkgs/stackmine-agent_1.0.0_*.deb /pkgs/stackmine-server_1.0.0_*.deb >/dev/null
echo "installed $(dpkg-query -W -f "\${Version}" stackmine-agent) $(dpkg-query -W -f "\${Version}" stackmine-server)"
echo "user $(getent passwd stackmine | cut -d: -f6,7)"
echo "spool $(stat -c "%a %U" /var/spool/stackmine) profiles $(stat -c "%a" /var/lib/stackmine/profiles)"
echo "conf $(stat -c "%a %U %G" /etc/stackmine/agent.conf) $(stat -c "%a %U %G" /etc/stackmine/stackmine.conf)"
echo "lib $(sm-guard lib)"
echo "help $(sm-agent --help 2>&1 | head -n 1 | cut -d" " -f1,2) $(sm-ingest --help 2>&1 | head -n 1 | cut -d" " -f1,2)"
systemd-analyze verify /lib/systemd/system/sm-ingest.service /lib/systemd/system/sm-web.service \
	/lib/systemd/system/sm-miner-worker.service /lib/systemd/system/sm-agent-collect.service && echo "units verified"
echo "SM_GUARD_URL=http://ingest.example:8080" >>/etc/stackmine/agent.conf
dpkg -i --force-confold /pkgs/stackmine-agent_1.0.1_*.deb /pkgs/stackmine-server_1.0.1_*.deb >/dev/null
echo "upgraded $(dpkg-query -W -f "\${Version}" stackmine-agent) $(dpkg-query -W -f "\${Version}" stackmine-server)"
echo "kept $(tail -n 1 /etc/stackmine/agent.conf) $(stat -c "%a %G" /etc/stackmine/agent.conf)"
touch /var/spool/stackmine/left-behind.json
dpkg --purge stackmine-agent stackmine-server >/dev/null
echo "purged, packages left: $(dpkg -l | grep -c stackmine || true)"
echo "user stays $(getent passwd stackmine | cut -d: -f1)"'
out=$(host "$script" 2>&1)
t_eq "install, upgrade, purge on an overlay host" "$out" "installed 1.0.0 1.0.0
user /nonexistent:/usr/sbin/nologin
spool 1777 root profiles 1777
conf 640 root stackmine 640 root stackmine
lib /usr/lib/stackmine/libsmguard.so
help usage: sm-agent usage: sm-ingest
units verified
upgraded 1.0.1 1.0.1
kept SM_GUARD_URL=http://ingest.example:8080 640 stackmine
purged, packages left: 0
user stays stackmine"
# what the host kept (directories aside, which the overlay copies up when their entries change): the
# user's entries in the account files, nothing else
t_eq "purge: nothing left but the system user" "$(cat "$T_TMP/left")" "./etc/.pwd.lock
./etc/group
./etc/group-
./etc/gshadow
./etc/gshadow-
./etc/passwd
./etc/passwd-
./etc/shadow
./etc/shadow-"
t_eq "this machine saw none of it" "$(ls /usr/lib/stackmine /etc/stackmine/agent.conf 2>&1 | grep -vc 'No such file')" 0

t_done

#!/usr/bin/env bash
# pg.sh: a private PostgreSQL cluster for development and the demo, kept inside
# the project (var/pg) so that it never touches the machine's own clusters.
#
#   deploy/pg.sh start  [DIR]           create it the first time, start it, create database stackmine
#   deploy/pg.sh stop   [DIR]           fast shutdown (no-op when not running)
#   deploy/pg.sh status [DIR]           exit 0 running, 3 stopped, 4 no cluster
#   deploy/pg.sh url    [DIR] [--tcp | --admin]
#                                       libpq conninfo for --db: the Unix socket as the stackmine
#                                       role; --tcp: 127.0.0.1 with a password file; --admin:
#                                       the socket as the cluster's superuser
#   deploy/pg.sh env    [DIR] [--admin] the same as PG* variables: eval "$(deploy/pg.sh env)"
#                                       lets every program and psql find the database without --db
#   deploy/pg.sh psql   [DIR] [PSQL ARGS...]   psql on database stackmine
#   deploy/pg.sh destroy [DIR]          stop it and delete it, data and all
#   deploy/pg.sh replica PRIMARY DIR    a streaming standby of the cluster in PRIMARY, made
#                                       with pg_basebackup and started (read-only)
#   deploy/pg.sh promote DIR            make the standby in DIR a primary (a failover by hand)
#   deploy/pg.sh backup DIR FILE        a base backup of the running cluster, WAL included, as one
#                                       compressed tar file (pg_basebackup; the server keeps serving)
#   deploy/pg.sh restore FILE DIR       a new cluster in DIR from such a file, started
#
# DIR defaults to $SM_PGDIR or var/pg in the repository. It holds data/ (the data
# directory; the Unix socket lives there too), server.log and pgpass.
# Environment: SM_PGPORT (port to try first), SM_PGBIN (server binaries,
# /usr/lib/postgresql/15/bin), SM_PG_SHARED_BUFFERS (e.g. 512MB; default: an
# eighth of memory, 128MB to 4GB), SM_PG_HUGE_PAGES=1 (shared memory in huge
# pages: start reserves as many as the server needs when too few are free, as
# root, and stop gives back what it reserved; docs/deployment.md says why).
#
# The server listens on its Unix socket (trust authentication: the data directory
# is mode 0700, so the file system decides who may connect) and on 127.0.0.1 only,
# with a password (scram-sha-256; trusting TCP would let every local user in as
# superuser). Port: $SM_PGPORT or 54329, or the next free one.
#
# Run as root, the cluster belongs to the `postgres` system user, as PostgreSQL
# refuses to run as root. When that user cannot reach DIR (a repository under
# /root or in a mode-0700 temporary directory), or when the socket path would be
# too long, the cluster goes to /var/tmp/stackmine-pg-<hash of DIR> and DIR
# becomes a symbolic link to it.
set -euo pipefail
# the caller's connection settings (of another cluster, say) must not steer this one's commands
unset PGHOST PGHOSTADDR PGPORT PGUSER PGDATABASE PGPASSWORD PGPASSFILE PGSERVICE PGOPTIONS

die() { echo "pg.sh: $*" >&2; exit 1; }
say() { echo "pg.sh: $*" >&2; }

usage() {
	sed -n '5,23p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//' >&2
	exit 2
}

repo=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd -P)
cmd=${1:-}
[ -n "$cmd" ] || usage
shift
dir=${SM_PGDIR:-$repo/var/pg}
if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then
	dir=$1
	shift
fi
case $dir in /*) ;; *) dir=$PWD/$dir ;; esac

pgbin=${SM_PGBIN:-/usr/lib/postgresql/15/bin}
[ -x "$pgbin/postgres" ] ||
	die "no PostgreSQL 15 server in $pgbin (Debian: apt-get install postgresql-15; 'make demo' installs it)"
osuser=$(id -un)
if [ "$(id -u)" -eq 0 ]; then
	osuser=postgres
	id postgres >/dev/null 2>&1 || die "running as root needs the 'postgres' system user (apt-get install postgresql)"
fi

# Runs a command as the cluster's owner, from / so that it never complains about
# a working directory it cannot enter.
as_owner() {
	if [ "$(id -u)" -eq 0 ]; then
		(cd / && runuser -u "$osuser" -- "$@")
	else
		(cd / && "$@")
	fi
}

# Sets base (the real directory behind DIR) without creating anything; empty
# when there is no cluster.
locate() {
	base=
	if [ -L "$dir" ]; then
		base=$(readlink -f "$dir" 2>/dev/null || true)
		[ -n "$base" ] && [ -d "$base/data" ] || base=
	elif [ -d "$dir/data" ]; then
		base=$(cd "$dir" && pwd -P)
	fi
	if [ -n "$base" ]; then
		data=$base/data
		if [ "$(id -u)" -ne 0 ] && [ "$(stat -c %U "$data")" != "$osuser" ]; then
			die "the cluster in $base belongs to OS user '$(stat -c %U "$data")'; run this as root or as that user"
		fi
	fi
	return 0
}

# Creates DIR (or its stand-in under /var/tmp) and sets base and data.
create_base() {
	local parent name hash reason=
	parent=$(dirname "$dir")
	name=$(basename "$dir")
	mkdir -p "$parent"
	parent=$(cd "$parent" && pwd -P)
	dir=$parent/$name
	if [ -L "$dir" ]; then
		# a link made by an earlier start (or by hand) whose target is gone or empty
		base=$(readlink -f "$dir") || die "$dir is a link that cannot be followed"
		[ -d "$base" ] || mkdir -m 0700 "$base"
		[ "$(id -u)" -ne 0 ] || chown "$osuser:" "$base"
		[ "$(id -u)" -ne 0 ] || runuser -u "$osuser" -- test -x "$base" ||
			die "$dir links to $base, which the '$osuser' user cannot enter"
		data=$base/data
		return 0
	fi
	if [ "$(id -u)" -eq 0 ] && ! runuser -u "$osuser" -- test -x "$parent" 2>/dev/null; then
		reason="the '$osuser' user cannot enter $parent"
	fi
	# a Unix socket path is at most 107 bytes: DIR/data/.s.PGSQL.NNNNN
	if [ $(( ${#dir} + 23 )) -gt 107 ]; then
		reason="the socket path under $dir would be too long"
	fi
	if [ -n "$reason" ]; then
		hash=$(printf '%s' "$dir" | sha256sum | cut -c1-12)
		base=/var/tmp/stackmine-pg-$hash
		if [ -e "$base" ] || [ -L "$base" ]; then
			# the name is predictable: accept only what this user made
			if [ -L "$base" ] || [ "$(stat -c %U:%a "$base")" != "$osuser:700" ]; then
				die "$base exists but is not a mode-0700 directory of '$osuser'; remove it"
			fi
		else
			mkdir -m 0700 "$base"
		fi
		ln -s "$base" "$dir"
		say "$reason: the cluster lives in $base ($dir links to it)"
	else
		base=$dir
		[ -d "$base" ] || mkdir -m 0700 "$base"
	fi
	[ "$(id -u)" -ne 0 ] || chown "$osuser:" "$base"
	data=$base/data
}

# The port the cluster is configured for, or empty.
conf_port() {
	[ -f "$data/stackmine.conf" ] || return 0
	sed -n 's/^port = \([0-9]*\)$/\1/p' "$data/stackmine.conf" | tail -n 1
}

# Port of the running server (from postmaster.pid), or the configured one.
cur_port() {
	local p=
	[ -r "$data/postmaster.pid" ] && p=$(sed -n 4p "$data/postmaster.pid")
	[ -n "$p" ] || p=$(conf_port)
	echo "${p:-${SM_PGPORT:-54329}}"
}

port_busy() {
	(: <>"/dev/tcp/127.0.0.1/$1") 2>/dev/null
}

running() {
	[ -n "$base" ] && as_owner "$pgbin/pg_ctl" -D "$data" status >/dev/null 2>&1
}

# A conninfo value, quoted when it has to be (spaces, quotes, backslashes).
cq() {
	local v=${1//\\/\\\\}
	case $1 in
	*[[:space:]\'\\]*|'') printf "'%s'" "${v//\'/\\\'}" ;;
	*) printf '%s' "$1" ;;
	esac
}

url() {
	local p
	p=$(cur_port)
	case ${1:-} in
	--tcp) echo "host=127.0.0.1 port=$p dbname=stackmine user=stackmine passfile=$(cq "$base/pgpass")" ;;
	--admin) echo "host=$(cq "$data") port=$p dbname=postgres user=$(stat -c %U "$data")" ;;
	'') echo "host=$(cq "$data") port=$p dbname=stackmine user=stackmine" ;;
	*) die "url: unknown option '$1' (--tcp, --admin)" ;;
	esac
}

# Settings sized from this machine (the reference is 2 cores and 24 GiB): a
# quarter of memory is the usual shared_buffers advice for a dedicated server;
# this cluster shares the machine with builds, tests and the miner, so an eighth.
write_conf() {
	local port=$1 mem_mb cores sb ecs mwm
	mem_mb=$(awk '/^MemTotal:/ { print int($2 / 1024) }' /proc/meminfo)
	cores=$(nproc)
	sb=$(( mem_mb / 8 )); [ $sb -ge 128 ] || sb=128; [ $sb -le 4096 ] || sb=4096
	ecs=$(( mem_mb / 2 )); [ $ecs -ge 512 ] || ecs=512
	mwm=$(( mem_mb / 32 )); [ $mwm -ge 64 ] || mwm=64; [ $mwm -le 1024 ] || mwm=1024
	as_owner tee "$data/stackmine.conf.new" >/dev/null <<-EOF
	# Written by deploy/pg.sh at every start ($mem_mb MB, $cores cores); override
	# with ALTER SYSTEM (postgresql.auto.conf), not here.
	listen_addresses = '127.0.0.1'
	port = $port
	unix_socket_directories = '$data'
	unix_socket_permissions = 0700
	password_encryption = scram-sha-256

	# ingest workers (4 per sm-ingest), the dashboard, the miner, psql
	max_connections = 100
	shared_buffers = ${SM_PG_SHARED_BUFFERS:-${sb}MB}
	huge_pages = ${huge:-try}
	effective_cache_size = ${ecs}MB
	work_mem = 32MB
	maintenance_work_mem = ${mwm}MB
	max_worker_processes = $(( cores + 2 ))
	max_parallel_workers = $cores
	max_parallel_workers_per_gather = $(( cores / 2 > 0 ? cores / 2 : 1 ))
	max_parallel_maintenance_workers = $(( cores / 2 > 0 ? cores / 2 : 1 ))
	random_page_cost = 1.1
	effective_io_concurrency = 200
	jit = off

	# durability stays on; ingest batches its commits (COPY per request)
	fsync = on
	synchronous_commit = on
	full_page_writes = on
	wal_compression = lz4
	wal_buffers = 16MB
	min_wal_size = 512MB
	max_wal_size = 4GB
	checkpoint_timeout = 15min
	checkpoint_completion_target = 0.9

	timezone = 'UTC'
	log_timezone = 'UTC'
	log_line_prefix = '%m [%p] %q%u@%d '
	log_min_duration_statement = 2s
	log_checkpoints = on
	log_lock_waits = on
	log_temp_files = 64MB
	EOF
	as_owner mv "$data/stackmine.conf.new" "$data/stackmine.conf"
}

init_cluster() {
	say "creating a PostgreSQL cluster in $data"
	# pg_hba.conf is replaced below
	as_owner "$pgbin/initdb" -D "$data" --encoding=UTF8 --locale=C --data-checksums \
		--auth=trust >"$base/initdb.log" 2>&1 ||
		{ cat "$base/initdb.log" >&2; die "initdb failed (output above)"; }
	as_owner tee "$data/pg_hba.conf" >/dev/null <<-'EOF'
	# Written by deploy/pg.sh. The socket sits in the mode-0700 data directory, so
	# only its owner (and root) can reach it; TCP needs the stackmine password.
	# TYPE  DATABASE     USER  ADDRESS       METHOD
	local   all          all                 trust
	local   replication  all                 trust
	host    all          all   127.0.0.1/32  scram-sha-256
	EOF
	printf "\ninclude_if_exists = 'stackmine.conf'\n" | as_owner tee -a "$data/postgresql.conf" >/dev/null
	# the password for TCP connections, as a libpq password file
	(umask 077 && printf '127.0.0.1:*:*:stackmine:%s\n' \
		"$(od -An -tx1 -N16 /dev/urandom | tr -d ' \n')" >"$base/pgpass")
	[ "$(id -u)" -ne 0 ] || chown "$osuser:" "$base/pgpass"
}

# Creates the stackmine role and database when missing; sets the role's password.
ensure_db() {
	local sock port pass
	sock=$data
	port=$(cur_port)
	pass=$(cut -d: -f5 "$base/pgpass")
	case $pass in *[!0-9a-f]*|'') die "$base/pgpass is damaged; remove it and the cluster, or restore it" ;; esac
	as_owner "$pgbin/psql" -X -q -v ON_ERROR_STOP=1 -h "$sock" -p "$port" -d postgres <<-EOF >/dev/null
	SELECT NOT EXISTS (SELECT FROM pg_roles WHERE rolname = 'stackmine') AS mkrole \gset
	\if :mkrole
	CREATE ROLE stackmine LOGIN;
	\endif
	ALTER ROLE stackmine PASSWORD '$pass';
	SELECT NOT EXISTS (SELECT FROM pg_database WHERE datname = 'stackmine') AS mkdb \gset
	\if :mkdb
	CREATE DATABASE stackmine OWNER stackmine;
	\endif
	EOF
}

cmd_start() {
	local port
	locate
	[ -n "$base" ] || create_base
	exec 9<"$base"
	flock -w 120 9 || die "another pg.sh holds the lock on $base"
	[ -f "$data/PG_VERSION" ] || init_cluster
	if [ "$(cat "$data/PG_VERSION")" != "$("$pgbin/postgres" -V | grep -o '[0-9]\+' | head -n 1)" ]; then
		die "$data was made by PostgreSQL $(cat "$data/PG_VERSION"); this is $pgbin"
	fi
	if running; then
		ensure_db
		say "already running (port $(cur_port))"
		return 0
	fi
	pick_port
	start_server "the server"
	ensure_db
	say "started on port $port (socket in $data, log $base/server.log)"
}

# Huge pages for the server's shared memory (SM_PG_HUGE_PAGES=1). With 4 KiB pages
# every backend faults in each page of shared_buffers it touches, once per page and
# backend: a hundred COPYs of 20,000 events into a young pool took 39,000 faults
# where one COPY of the same rows took 9,600, and 16 % longer on a virtual machine
# (docs/scaling.md). Reserving changes vm.nr_hugepages, which every cluster of the
# machine shares, so it happens under one lock, and $base/hugepages records what
# this cluster added and in which boot (a reboot resets vm.nr_hugepages).
hp_lock=/var/tmp/stackmine-hugepages.lock
hp_sys=/proc/sys/vm/nr_hugepages

# Takes the machine-wide lock on fd 8 (read-only: any user may open it, whoever made
# it); 1 when it cannot, saying why (WHAT is what then happens).
hp_lock_take() {
	(umask 0 && : >>"$hp_lock") 2>/dev/null || true
	if ! { exec 8<"$hp_lock"; } 2>/dev/null; then
		say "huge pages: cannot open $hp_lock; $1"
		return 1
	fi
	flock -w 60 8 || { say "huge pages: another pg.sh holds $hp_lock; $1"; exec 8<&-; return 1; }
}

# The pages this cluster's record says it added in this boot (0: none, or another boot's).
hp_mine() {
	local n boot
	[ -f "$base/hugepages" ] || { echo 0; return 0; }
	read -r n boot <"$base/hugepages" || true
	case $n in '' | *[!0-9]*) n=0 ;; esac
	[ "$boot" = "$(cat /proc/sys/kernel/random/boot_id)" ] || n=0
	echo "$n"
}

# Sets huge (on or try) for write_conf; reserves pages when SM_PG_HUGE_PAGES=1 asks.
# With huge=on, fd 8 holds the lock until the server holds its pages (start_server
# closes it), so that no other cluster's start takes them first.
huge_reserve() {
	local need free mine total got
	huge=try
	[ "${SM_PG_HUGE_PAGES:-0}" = 1 ] || return 0
	write_conf "$port"
	# a runtime-computed setting: postgres -C reads it only while the server is down
	need=$(as_owner "$pgbin/postgres" -D "$data" -C shared_memory_size_in_huge_pages 2>/dev/null) || need=
	case $need in '' | *[!0-9]* | -1) say "huge pages: this kernel offers none; 4 KiB pages"; return 0 ;; esac
	hp_lock_take "4 KiB pages" || return 0
	free=$(awk '/^HugePages_Free:/ { f = $2 } /^HugePages_Rsvd:/ { r = $2 } END { print f - r }' /proc/meminfo)
	if [ "$free" -lt "$need" ]; then
		if [ "$(id -u)" -ne 0 ]; then
			say "huge pages: $need needed, $free free, and only root may reserve more; 4 KiB pages"
			exec 8<&-
			return 0
		fi
		total=$(cat "$hp_sys")
		echo $(( total + need - free )) >"$hp_sys" 2>/dev/null || true
		got=$(( $(cat "$hp_sys") - total ))
		[ "$got" -ge 0 ] || got=0
		mine=$(hp_mine)
		echo "$(( mine + got )) $(cat /proc/sys/kernel/random/boot_id)" >"$base/hugepages"
		if [ "$got" -lt $(( need - free )) ]; then
			say "huge pages: $need needed, $free free, and the kernel gave only $got more (memory too fragmented); 4 KiB pages"
			exec 8<&-
			huge_release
			return 0
		fi
		say "huge pages: reserved $got more of $(( $(awk '/^Hugepagesize:/ { print $2 }' /proc/meminfo) / 1024 )) MB ($base/hugepages; stop gives them back)"
	fi
	huge=on
}

# Gives back the huge pages this cluster's start reserved in this boot, if any.
huge_release() {
	local mine total
	[ -n "$base" ] && [ -f "$base/hugepages" ] || return 0
	mine=$(hp_mine)
	if [ "$mine" -eq 0 ]; then
		rm -f "$base/hugepages"
		return 0
	fi
	hp_lock_take "$mine pages stay reserved" || return 0
	total=$(cat "$hp_sys")
	[ "$mine" -le "$total" ] || mine=$total
	if echo $(( total - mine )) >"$hp_sys" 2>/dev/null; then
		rm -f "$base/hugepages"
	else
		say "huge pages: cannot give back $mine pages (vm.nr_hugepages; $base/hugepages keeps the count)"
	fi
	exec 8<&-
}

# Writes the configuration for $port and starts the server; dies naming what (WHAT) did not.
start_server() {
	huge_reserve
	write_conf "$port"
	as_owner touch "$base/server.log" 2>/dev/null || true
	# 9<&- 8<&-: the server must not inherit (and so keep) start's locks
	if ! as_owner "$pgbin/pg_ctl" -D "$data" -l "$base/server.log" -w -t 120 -s start 9<&- 8<&-; then
		tail -n 30 "$base/server.log" >&2
		exec 8<&-
		running || huge_release
		die "$1 did not start (log: $base/server.log, last lines above)"
	fi
	exec 8<&-
}

# Picks a free port from SM_PGPORT (or the configured one, or 54329) on; sets port.
pick_port() {
	local want
	want=${SM_PGPORT:-$(conf_port)}
	want=${want:-54329}
	port=$want
	while port_busy "$port"; do
		port=$(( port + 1 ))
		[ $port -lt $(( want + 100 )) ] || die "ports $want to $port are all in use; set SM_PGPORT"
	done
	[ "$port" = "$want" ] || say "port $want is in use, using $port"
}

cmd_replica() {
	local pdir=$1 pdata pbase pport port
	# the primary: its socket, port and password file
	dir=$pdir
	case $dir in /*) ;; *) dir=$PWD/$dir ;; esac
	locate
	[ -n "$base" ] && running || die "no running cluster in $pdir (deploy/pg.sh start $pdir)"
	pdata=$data pbase=$base pport=$(cur_port)
	if ! grep -q '^local[[:space:]]*replication' "$pdata/pg_hba.conf"; then
		# a cluster made before standbys were: let its owner replicate over the socket
		printf 'local   replication  all                 trust\n' | as_owner tee -a "$pdata/pg_hba.conf" >/dev/null
		as_owner "$pgbin/pg_ctl" -D "$pdata" -s reload
	fi
	# the standby
	dir=$2
	case $dir in /*) ;; *) dir=$PWD/$dir ;; esac
	locate
	[ -z "$base" ] || die "$dir holds a cluster already"
	create_base
	say "copying the cluster in $pdir (pg_basebackup)"
	as_owner "$pgbin/pg_basebackup" -D "$data" -h "$pdata" -p "$pport" -U "$osuser" -R -X stream \
		-c fast >"$base/basebackup.log" 2>&1 || { cat "$base/basebackup.log" >&2; die "pg_basebackup failed"; }
	cp "$pbase/pgpass" "$base/pgpass"
	[ "$(id -u)" -ne 0 ] || chown "$osuser:" "$base/pgpass"
	SM_PGPORT=$(( pport + 1 )) pick_port
	start_server "the standby"
	say "standby of $pdir started on port $port (socket in $data)"
}

cmd_promote() {
	locate
	[ -n "$base" ] && running || die "no running cluster in $dir"
	as_owner "$pgbin/pg_ctl" -D "$data" -w -t 60 -s promote || die "promote failed (log: $base/server.log)"
	say "promoted: $dir is a primary (port $(cur_port))"
}

cmd_backup() {
	local file=$1 tmp
	case $file in /*) ;; *) file=$PWD/$file ;; esac
	locate
	[ -n "$base" ] && running || die "no running cluster in $dir"
	[ ! -e "$file" ] || die "$file exists; not overwriting it"
	tmp=$(mktemp -d /var/tmp/sm-backup.XXXXXX)
	[ "$(id -u)" -ne 0 ] || chown "$osuser:" "$tmp"
	# the data directory and the WAL it needs in one tar stream, checked as it is written
	if ! as_owner "$pgbin/pg_basebackup" -D "$tmp/b" -h "$data" -p "$(cur_port)" -U "$osuser" \
		-Ft -X fetch -c fast --manifest-checksums=SHA256 >"$tmp/log" 2>&1; then
		cat "$tmp/log" >&2
		rm -rf "$tmp"
		die "pg_basebackup failed"
	fi
	cp "$base/pgpass" "$tmp/b/pgpass"
	tar -C "$tmp/b" -czf "$file" . || { rm -rf "$tmp"; die "cannot write $file"; }
	rm -rf "$tmp"
	say "backup of $dir in $file ($(du -h "$file" | cut -f1))"
}

cmd_restore() {
	local file=$1 tmp port
	case $file in /*) ;; *) file=$PWD/$file ;; esac
	[ -r "$file" ] || die "cannot read $file"
	dir=$2
	case $dir in /*) ;; *) dir=$PWD/$dir ;; esac
	locate
	[ -z "$base" ] || die "$dir holds a cluster already"
	create_base
	tmp=$(mktemp -d /var/tmp/sm-restore.XXXXXX)
	tar -C "$tmp" -xzf "$file" || { rm -rf "$tmp"; die "$file is not a backup made by pg.sh backup"; }
	[ -f "$tmp/base.tar" ] && [ -f "$tmp/pgpass" ] && [ -f "$tmp/backup_manifest" ] ||
		{ rm -rf "$tmp"; die "$file is not a backup made by pg.sh backup"; }
	cp "$tmp/pgpass" "$tmp/backup_manifest" "$base/"
	[ "$(id -u)" -ne 0 ] || chown "$osuser:" "$base/pgpass" "$base/backup_manifest"
	as_owner mkdir -p -m 0700 "$data"
	as_owner tar -C "$data" -xf - <"$tmp/base.tar"
	rm -rf "$tmp"
	# the backup's manifest says what every file must be (sizes and SHA-256)
	as_owner "$pgbin/pg_verifybackup" -n -m "$base/backup_manifest" "$data" >/dev/null ||
		die "the restored files do not match the backup's manifest"
	pick_port
	start_server "the restored cluster"
	say "restored $file into $dir, started on port $port"
}

cmd_stop() {
	locate
	if ! running; then
		huge_release
		say "not running${base:+ ($base)}"
		return 0
	fi
	as_owner "$pgbin/pg_ctl" -D "$data" -m fast -w -t 120 -s stop ||
		die "the server did not stop (log: $base/server.log)"
	huge_release
	say "stopped ($base)"
}

cmd_destroy() {
	locate
	if [ -z "$base" ]; then
		say "no cluster in $dir"
		rm -f "$dir" 2>/dev/null || true # a dangling link
		return 0
	fi
	# refuse anything that does not look like a cluster this script made
	if [ ! -f "$data/PG_VERSION" ] || [ ! -f "$data/stackmine.conf" ]; then
		die "$base does not look like a cluster made by pg.sh; not deleting it"
	fi
	if running; then
		cmd_stop
	fi
	huge_release
	rm -rf -- "$base"
	[ ! -L "$dir" ] || rm -f -- "$dir"
	say "deleted $base"
}

cmd_status() {
	locate
	if [ -z "$base" ]; then
		echo "no cluster in $dir (deploy/pg.sh start creates one)"
		exit 4
	fi
	if running; then
		echo "running: pid $(head -n 1 "$data/postmaster.pid"), port $(cur_port), data $data"
		echo "log: $base/server.log"
		echo "url: $(url)"
		exit 0
	fi
	echo "stopped: data $data"
	exit 3
}

case $cmd in
start) [ $# -eq 0 ] || usage; cmd_start ;;
stop) [ $# -eq 0 ] || usage; cmd_stop ;;
status) [ $# -eq 0 ] || usage; cmd_status ;;
destroy) [ $# -eq 0 ] || usage; cmd_destroy ;;
replica) [ $# -eq 1 ] || usage; cmd_replica "$dir" "$1" ;;
promote) [ $# -eq 0 ] || usage; cmd_promote ;;
backup) [ $# -eq 1 ] || usage; cmd_backup "$1" ;;
restore) [ $# -eq 1 ] || usage; cmd_restore "$dir" "$1" ;;
url)
	[ $# -le 1 ] || usage
	locate
	[ -n "$base" ] || die "no cluster in $dir (run: deploy/pg.sh start)"
	running || say "warning: the cluster is not running (deploy/pg.sh start)"
	url "${1:-}"
	;;
env)
	[ $# -le 1 ] || usage
	locate
	[ -n "$base" ] || die "no cluster in $dir (run: deploy/pg.sh start)"
	case ${1:-} in
	--admin) user=$(stat -c %U "$data") db=postgres ;;
	'') user=stackmine db=stackmine ;;
	*) usage ;;
	esac
	printf 'export PGHOST=%q PGPORT=%q PGUSER=%q PGDATABASE=%q\n' "$data" "$(cur_port)" "$user" "$db"
	;;
psql)
	locate
	[ -n "$base" ] || die "no cluster in $dir (run: deploy/pg.sh start)"
	running || die "the cluster is not running (deploy/pg.sh start)"
	exec "$pgbin/psql" "$(url)" "$@"
	;;
-h|--help|help) usage ;;
*) usage ;;
esac

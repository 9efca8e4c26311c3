#!/usr/bin/env bash
# pg_hugepages: deploy/pg.sh with SM_PG_HUGE_PAGES=1 puts the server's shared memory in huge
# pages. As root, start reserves as many as the server needs (vm.nr_hugepages), the postmaster
# maps its shared memory with them, and stop and destroy give back exactly what start added in
# this boot, also after the server died without a stop. Without root and free pages it says so and
# starts with 4 KiB pages; with enough free it reserves nothing. Without the setting nothing changes.
. "$(dirname "$0")/../lib.sh"

PG=$SM_REPO/deploy/pg.sh
P=$T_TMP/pg
t_cleanup '"$PG" destroy "$P" >/dev/null 2>&1'
total() { awk '/^HugePages_Total:/ { print $2 }' /proc/meminfo; }
conf_huge() { sed -n 's/^huge_pages = //p' "$P/data/stackmine.conf"; }
# the size and page size of the postmaster's shared mapping in huge pages, in kB
hugemap() {
	awk '/anon_hugepage/ { on = 1; next } on && /^Size:/ { s = $2 } on && /^KernelPageSize:/ { print s, $2; exit }' \
		"/proc/$(head -n 1 "$P/data/postmaster.pid")/smaps"
}
start() { SM_PG_SHARED_BUFFERS=64MB SM_PGPORT=$(free_port) "$PG" start "$P" >"$T_TMP/start.log" 2>&1; }
free() { awk '/^HugePages_Free:/ { f = $2 } /^HugePages_Rsvd:/ { r = $2 } END { print f - r }' /proc/meminfo; }

[ -r /proc/sys/vm/nr_hugepages ] || t_bail "this kernel has no huge pages" "/proc/sys/vm/nr_hugepages missing"
before=$(total)

start || { cat "$T_TMP/start.log"; t_bail "cluster starts"; }
t_eq "without SM_PG_HUGE_PAGES: huge_pages = try, nothing reserved" "$(conf_huge) $(total)" "try $before"
"$PG" stop "$P" >/dev/null 2>&1
# what the server needs, as pg.sh asks it (the cluster is stopped)
if [ "$(id -u)" -eq 0 ]; then
	need=$(cd / && runuser -u "$(stat -c %U "$P/data")" -- "${SM_PGBIN:-/usr/lib/postgresql/15/bin}/postgres" \
		-D "$(readlink -f "$P")/data" -C shared_memory_size_in_huge_pages)
else
	need=$("${SM_PGBIN:-/usr/lib/postgresql/15/bin}/postgres" -D "$P/data" -C shared_memory_size_in_huge_pages)
fi
t_match "postgres -C: the pages 64 MB of shared buffers need" "$need" '^[0-9]+$'

if [ "$(id -u)" -ne 0 ] || [ "$(free)" -ge "$need" ]; then
	# not root, or enough pages free already: nothing to reserve
	f=$(free)
	SM_PG_HUGE_PAGES=1 start || { cat "$T_TMP/start.log"; t_bail "cluster starts"; }
	if [ "$f" -lt "$need" ]; then
		t_eq "not root, too few free: said, 4 KiB pages" "$(grep 'huge pages' "$T_TMP/start.log")" \
			"pg.sh: huge pages: $need needed, $f free, and only root may reserve more; 4 KiB pages"
		t_eq "... huge_pages = try, nothing reserved" "$(conf_huge) $(total)" "try $before"
	else
		t_eq "enough free: huge_pages = on, nothing reserved, no record" \
			"$(conf_huge) $(total) $([ -e "$P/hugepages" ] && echo record)" "on $before "
	fi
	t_done
fi
free0=$(free)

SM_PG_HUGE_PAGES=1 start || { cat "$T_TMP/start.log"; t_bail "cluster starts with huge pages"; }
read -r mine boot <"$P/hugepages"
t_eq "start reserved what was missing, recorded with this boot" "$mine $boot" \
	"$(( need - free0 )) $(cat /proc/sys/kernel/random/boot_id)"
t_match "... and said so" "$(grep 'huge pages' "$T_TMP/start.log")" \
	"^pg\.sh: huge pages: reserved $mine more of 2 MB \(.*/hugepages; stop gives them back\)$"
t_eq "... vm.nr_hugepages raised by the pages recorded" "$(( $(total) - before ))" "$mine"
t_eq "... the server does not hold the machine-wide lock" \
	"$(ls -l "/proc/$(head -n 1 "$P/data/postmaster.pid")/fd" | grep -c stackmine-hugepages)" 0
t_eq "... huge_pages = on" "$(conf_huge)" on
read -r size page <<<"$(hugemap)"
t_eq "the postmaster's shared memory is in 2 MB pages" "$page" 2048
t_eq "... and holds shared_buffers (64 MB)" "$(( size >= 64 * 1024 ))" 1

SM_PG_HUGE_PAGES=1 start
t_eq "a second start while it runs: nothing more reserved" "$(( $(total) - before )) $(cut -d' ' -f1 "$P/hugepages")" "$mine $mine"

"$PG" stop "$P" >/dev/null 2>&1
t_eq "stop gives back what start reserved" "$(total) $([ -e "$P/hugepages" ] && echo kept || echo gone)" "$before gone"

SM_PG_HUGE_PAGES=1 start || { cat "$T_TMP/start.log"; t_bail "cluster starts again"; }
pm=$(head -n 1 "$P/data/postmaster.pid")
kids=$(pgrep -P "$pm" | tr '\n' ' ')
kill -KILL "$pm"
# its children leave once they notice; the shared memory goes with the last of them
for _ in $(seq 100); do
	alive=0
	for k in $pm $kids; do kill -0 "$k" 2>/dev/null && alive=1; done
	[ $alive = 1 ] || break
	sleep 0.1
done
SM_PG_HUGE_PAGES=1 start || { cat "$T_TMP/start.log"; t_bail "cluster starts after its postmaster died"; }
t_eq "after the postmaster died: the next start reuses its reservation" "$(( $(total) - before )) $(conf_huge)" "$mine on"
read -r size page <<<"$(hugemap)"
t_eq "... and maps it" "$page" 2048

# a record from another boot (vm.nr_hugepages went back to its boot setting since) is not given back
echo "$mine 00000000-0000-0000-0000-000000000000" >"$P/hugepages"
"$PG" stop "$P" >/dev/null 2>&1
t_eq "a record from another boot: nothing given back, the record gone" \
	"$(total) $([ -e "$P/hugepages" ] && echo kept || echo gone)" "$(( before + mine )) gone"
echo $(( $(cat /proc/sys/vm/nr_hugepages) - mine )) >/proc/sys/vm/nr_hugepages
SM_PG_HUGE_PAGES=1 start || { cat "$T_TMP/start.log"; t_bail "cluster starts again"; }
"$PG" destroy "$P" >/dev/null 2>&1
t_eq "destroy gives back what start reserved" "$(total)" "$before"
t_done

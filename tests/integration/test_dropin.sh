#!/usr/bin/env bash
# dropin: sm-guard enable, disable and status against a root of its own
# (--root, as systemctl has it): the drop-in's exact text (quoting of labels
# with commas, quotes and %, which systemd would read as a specifier), that
# systemd-analyze verify reads the unit with it without a word, the status
# line, removal, and the refusals. systemd is not PID 1 here, so the reload is
# reported as not done; docs/fleet.md says how the test hosts run services.
export SM_TEST_FRESH_DB=0
. "$(dirname "$0")/../lib.sh"

guard=$SM_BIN_DIR/sm-guard
root=$T_TMP/root
lib=$("$guard" lib)
mkdir -p "$root"

out=$("$guard" enable nginx --app web --label tier=edge --label 'note=50% "x",y' --root "$root" 2>&1)
t_eq "enable: exit status and what it did" "$?|$out" "0|wrote $root/etc/systemd/system/nginx.service.d/stackmine-guard.conf
systemd is not running here: it reads the drop-in when it starts
restart the service to guard it: systemctl restart nginx.service"
t_eq "enable: the drop-in" "$(cat "$root/etc/systemd/system/nginx.service.d/stackmine-guard.conf")" \
"# Written by sm-guard enable nginx.service; \`sm-guard disable nginx.service\` removes it. Restart the
# service for a change to take effect. docs/guard.md, \"Under systemd\".
[Service]
EnvironmentFile=-/etc/stackmine/agent.conf
Environment=\"LD_PRELOAD=$lib\"
Environment=\"SM_GUARD_APP=web\"
Environment=\"SM_GUARD_LABELS=tier=edge,note=50%% \\\"x\\\"\\\\,y\"
ReadWritePaths=-/var/spool/stackmine -/var/lib/stackmine/profiles -/run/stackmine/guard"

# systemd reads the unit with the drop-in: no warning, no error
mkdir -p "$T_TMP/units"
printf '[Unit]\nDescription=a service\n[Service]\nExecStart=/usr/bin/sleep 1\n' >"$T_TMP/units/nginx.service"
cp -r "$root/etc/systemd/system/nginx.service.d" "$T_TMP/units/"
out=$(SYSTEMD_UNIT_PATH=$T_TMP/units: systemd-analyze verify "$T_TMP/units/nginx.service" 2>&1)
t_eq "systemd-analyze verify: the unit with its drop-in" "$?|$out" "0|"

"$guard" enable redis-server.service --root "$root" >/dev/null
t_eq "status: the guarded services" "$("$guard" status --root "$root")" \
"nginx.service	app=web	labels=tier=edge,note=50% \"x\"\\,y	-
redis-server.service	app=(its executable)	labels=-	-"

out=$("$guard" disable nginx --root "$root" 2>&1)
t_eq "disable: removed" "$?|$(head -n 1 <<<"$out")" "0|removed the guard of nginx.service"
t_eq "disable: the drop-in and its directory are gone" "$(ls "$root/etc/systemd/system")" "redis-server.service.d"
t_eq "disable: again, nothing to do" "$("$guard" disable nginx --root "$root")" "nginx.service is not guarded"

out=$("$guard" enable ../etc/passwd --root "$root" 2>&1)
t_eq "enable: not a unit name" "$?|$out" "1|sm-guard: UNIT '../etc/passwd': not a unit name (letters, digits and :-_.\\@)"
out=$("$guard" enable nginx.socket --root "$root" 2>&1)
t_eq "enable: only services" "$?|$out" "1|sm-guard: UNIT 'nginx.socket': only services can be guarded"
out=$("$guard" enable nginx --label novalue --root "$root" 2>&1)
t_eq "enable: a label without a value" "$?|$out" "2|sm-guard: --label 'novalue': want KEY=VALUE"
out=$("$guard" enable nginx --app "$(printf 'a\nb')" --root "$root" 2>&1)
t_eq "enable: no line break in a value" "$?|$out" "1|sm-guard: --app: no line breaks"

t_done

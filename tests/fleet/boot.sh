#!/bin/sh
# boot.sh DIR NAME PUBKEY SYSTEMCTL: a simulated host's start (tests/integration/test_fleet.sh).
# Run inside the host's network namespace and a new mount and UTS namespace: an
# overlay over this machine's root (writes stay in DIR, unseen by other hosts),
# the host name, root's authorized key, the test hosts' systemctl (systemd is not
# PID 1 here: docs/fleet.md, "Test hosts"), then sshd in the foreground, chrooted.
set -e
D=$1 N=$2 K=$3 S=$4
hostname "$N"
mount -t tmpfs tmpfs "$D"
mkdir -p "$D/u" "$D/w" "$D/m"
mount -t overlay overlay -o "lowerdir=/,upperdir=$D/u,workdir=$D/w" "$D/m"
mount --bind /proc "$D/m/proc"
mount --rbind /dev "$D/m/dev"
mount --rbind /sys "$D/m/sys"
mount -t tmpfs tmpfs "$D/m/run"
mount -t tmpfs tmpfs "$D/m/tmp"
mkdir -p "$D/m/root/.ssh" "$D/m/run/sshd" "$D/m/usr/local/bin"
cp "$K" "$D/m/root/.ssh/authorized_keys"
chmod 700 "$D/m/root/.ssh"
chmod 600 "$D/m/root/.ssh/authorized_keys"
cp "$S" "$D/m/usr/local/bin/systemctl"
echo "$N" >"$D/m/etc/hostname"
exec chroot "$D/m" sh -c 'rm -f /etc/ssh/ssh_host_*; ssh-keygen -A >/dev/null
	exec /usr/sbin/sshd -D -e -o UsePAM=no -o PermitRootLogin=prohibit-password -o PidFile=/run/sshd.pid'

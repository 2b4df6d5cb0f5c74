#!/bin/busybox sh
# /init of the ParaNIC QEMU guest (built by paranic.qemu, docs/driver.md "QEMU").
# Runs /scripts/<pn.run>.sh (kernel command line: pn.run=NAME, pn.args="..." with
# words separated by commas), prints PN-EXIT <status> and the kernel log between
# PN-DMESG-BEGIN/END on the console, and powers off.
/bin/busybox mkdir -p /proc /sys /dev /tmp /bin /sbin /usr/bin /usr/sbin
/bin/busybox --install -s
mount -t proc proc /proc
mount -t sysfs sysfs /sys
mount -t devtmpfs devtmpfs /dev
mount -t tmpfs tmpfs /tmp
export PATH=/bin:/sbin:/usr/bin:/usr/sbin:/pn
run=$(sed -n 's/.*pn\.run=\([^ ]*\).*/\1/p' /proc/cmdline)
args=$(sed -n 's/.*pn\.args=\([^ ]*\).*/\1/p' /proc/cmdline | tr , ' ')
echo "PN-BOOT uptime $(cut -d' ' -f1 /proc/uptime) run=$run args=$args"
if [ -f "/scripts/$run.sh" ]; then
	sh -e "/scripts/$run.sh" $args
	rc=$?
else
	echo "no script /scripts/$run.sh"
	rc=127
fi
echo "PN-EXIT $rc uptime $(cut -d' ' -f1 /proc/uptime)"
echo PN-DMESG-BEGIN
dmesg
echo PN-DMESG-END
sync
poweroff -f

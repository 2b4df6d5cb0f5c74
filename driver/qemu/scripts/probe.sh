# The device's PCI view, the driver's probe, GET_INFO, bad input, unload.
# args: [bad] [dead:CFG] -- also run the bad-input cases (pn_guest bad); then load the
#   module again (quiesce_ms=60000, so a wait that is not cut short shows) and make the
#   device fall off the bus (pn_proxydev --remove-at CFG; pn_guest dead)
for d in /sys/bus/pci/devices/*; do
	echo "PN-PCI $(basename $d) $(cat $d/vendor) $(cat $d/device) $(cat $d/class) $(head -1 $d/resource)"
done
insmod /pn/paranic.ko
ls -l /dev/paranic0
dmesg | grep -i paranic | sed 's/^/PN-DMESG /'
echo "PN-STEP devnode $(ls /dev | grep paranic | tr '\n' ' ')"
echo "PN-STEP sysfs contexts $(cat /sys/class/misc/paranic0/contexts) node_id $(cat /sys/class/misc/paranic0/node_id) mtu $(cat /sys/class/misc/paranic0/mtu)"
/pn/pn_guest info
dead=
for a in "$@"; do
	case "$a" in
	bad) /pn/pn_guest bad || echo "PN-STEP bad-input failures $?" ;;
	dead:*) dead=${a#dead:} ;;
	esac
done
echo "PN-STEP contexts-before-rmmod $(cat /sys/class/misc/paranic0/contexts)"
rmmod paranic
echo "PN-STEP rmmod $(grep -c '^paranic ' /proc/modules)"
if [ -n "$dead" ]; then
	insmod /pn/paranic.ko quiesce_ms=60000
	t0=$(cut -d' ' -f1 /proc/uptime)
	drc=0
	/pn/pn_guest dead "$dead" || drc=$?
	echo "PN-STEP dead exit $drc after $(awk "BEGIN{print $(cut -d' ' -f1 /proc/uptime) - $t0}") s"
	rmmod paranic
	echo "PN-STEP dead rmmod $(grep -c '^paranic ' /proc/modules)"
fi

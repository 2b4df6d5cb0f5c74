# The device's PCI view, the driver's probe, GET_INFO, bad input, unload.
# args: [bad] -- also run the bad-input cases (pn_guest bad)
for d in /sys/bus/pci/devices/*; do
	echo "PN-PCI $(basename $d) $(cat $d/vendor) $(cat $d/device) $(cat $d/class) $(head -1 $d/resource)"
done
insmod /pn/paranic.ko
ls -l /dev/paranic0
dmesg | grep -i paranic | sed 's/^/PN-DMESG /'
echo "PN-STEP devnode $(ls /dev | grep paranic | tr '\n' ' ')"
echo "PN-STEP sysfs contexts $(cat /sys/class/misc/paranic0/contexts) node_id $(cat /sys/class/misc/paranic0/node_id) mtu $(cat /sys/class/misc/paranic0/mtu)"
/pn/pn_guest info
if [ "$1" = bad ]; then
	/pn/pn_guest bad || echo "PN-STEP bad-input failures $?"
fi
echo "PN-STEP contexts-before-rmmod $(cat /sys/class/misc/paranic0/contexts)"
rmmod paranic
echo "PN-STEP rmmod $(grep -c '^paranic ' /proc/modules)"

# Load and unload paranic.ko (with or without a device), twice; show the sysfs view.
for round in 1 2; do
	insmod /pn/paranic.ko
	echo "PN-STEP insmod $round: $(grep -c '^paranic ' /proc/modules) module(s)"
	ls /sys/bus/pci/drivers/paranic/ | tr '\n' ' '; echo
	ls /dev/ | grep paranic || echo "no /dev/paranic*"
	rmmod paranic
	echo "PN-STEP rmmod $round: $(grep -c '^paranic ' /proc/modules) module(s)"
done

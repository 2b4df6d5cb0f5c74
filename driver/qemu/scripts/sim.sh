# The guest as one node of a simulated cluster (pn_proxydev --sim).
# args: NODE NODES X Y PROGRAM [ARGS...]
#   PROGRAM: conformance (hal_conformance pci ARGS), rawdata (rawdata_test ARGS pci),
#            bench (pn_bench ARGS), bad, killdma, adversarial (both) (pn_guest), info,
#            suite PART... (several cases in one boot, each reported as
#            "PN-STEP part NAME exit RC after S s"; PART: conformance:ARG:ARG... (colons
#            for spaces), or a pn_guest command: killdma, handover, deregbusy, bad)
node=$1 nodes=$2 x=$3 y=$4 prog=$5
shift 5
# The simulated NIC runs about 1000 times slower than a board (one 1 MiB message takes
# about a second of wall time), so a hand-over may wait up to a minute, not 500 ms.
insmod /pn/paranic.ko quiesce_ms=${PN_QUIESCE_MS:-60000}
dmesg | grep 'paranic0:' | sed 's/^/PN-DMESG /'
/pn/pn_guest setnode "$node" "$nodes" "$x" "$y"
/pn/pn_guest info
/pn/pn_guest status
for f in /sys/class/misc/paranic0/firmware/* /sys/class/misc/paranic0/links/*; do
	echo "PN-SYSFS $(basename $f) $(cat $f)"
done
# The guest's clock is not the simulator's: no cross-node timestamp order checks.
export PARANIC_BACKEND=pci PARANIC_DEVICE=/dev/paranic0 HAL_CONF_TIMEOUT_MS=${HAL_CONF_TIMEOUT_MS:-120000}
export HAL_CONF_NO_SHARED_CLOCK=1
rc=0
t0=$(cut -d' ' -f1 /proc/uptime)
case "$prog" in
conformance) /pn/hal_conformance pci "$@" || rc=$? ;;
rawdata) /pn/rawdata_test "$@" pci || rc=$? ;;
bench) /pn/pn_bench "$@" || rc=$? ;;
bad) /pn/pn_guest bad || rc=$? ;;
killdma) /pn/pn_guest killdma || rc=$? ;;
adversarial) /pn/pn_guest bad || rc=$?; /pn/pn_guest killdma || rc=$((rc + $?)) ;;
info) ;;
suite)
	for part in "$@"; do
		name=${part%%:*}
		p0=$(cut -d' ' -f1 /proc/uptime)
		prc=0
		case "$name" in
		conformance) /pn/hal_conformance pci $(echo "${part#conformance}" | tr : ' ') || prc=$? ;;
		killdma|handover|deregbusy|bad) /pn/pn_guest "$name" || prc=$? ;;
		*) echo "unknown part $name"; prc=2 ;;
		esac
		echo "PN-STEP part $name exit $prc after $(awk "BEGIN{print $(cut -d' ' -f1 /proc/uptime) - $p0}") s"
		echo "PN-STEP part $name contexts-after $(cat /sys/class/misc/paranic0/contexts)"
		rc=$((rc + prc))
	done ;;
*) echo "unknown program $prog"; rc=2 ;;
esac
echo "PN-STEP $prog exit $rc after $(awk "BEGIN{print $(cut -d' ' -f1 /proc/uptime) - $t0}") s"
echo "PN-STEP contexts-after $(cat /sys/class/misc/paranic0/contexts)"
for f in /sys/class/misc/paranic0/counters/*; do echo "PN-COUNTER $(basename $f) $(cat $f)"; done
rmmod paranic
echo "PN-STEP rmmod $(grep -c '^paranic ' /proc/modules)"
exit $rc

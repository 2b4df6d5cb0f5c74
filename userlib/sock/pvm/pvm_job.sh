#!/bin/sh
# pvm_job.sh: PVM's examples across the nodes of a ParaNIC job (docs/pvm.md).
#
#   paranic run --backend sw --nodes 3 -- sh userlib/sock/pvm/pvm_job.sh WORKDIR [PROGRAM...]
#
# Node 0 starts pvmd with a hostfile naming every node of the job (pn-node0 ..); pvmd
# starts the other nodes' pvmds through paranic-rsh (PVM_RSH). Once the virtual machine
# has all hosts, node 0 runs each PROGRAM (default: hello.pvm master1) as a process of
# node 0, prints "conf" and "halt"s the virtual machine. Every PVM process gets the socket
# library preloaded (paranic-rsh), so its TCP and UDP between nodes go over ParaNIC. The
# other nodes' own processes do nothing (their pvmds are further processes of them).
# Per-node PVM_TMP (pvmd's socket and log pvml.<uid>): WORKDIR/pvm/node<M>.
#
#   PVM_EP      where pvmd looks for the programs it spawns (hostfile ep=; default /usr/bin)
#   PVM_WAIT_S  how long to wait for all hosts (default 30)
# Output of node 0: "hosts N", per program "run PROGRAM", its output and "time PROGRAM ms
# T" (its wall time, PVM's task start included), "ok pvm" (or "FAIL ...", exit 1).
[ "$PARANIC_NODE" = 0 ] || exit 0
work=${1:?usage: pvm_job.sh WORKDIR [PROGRAM...]}
shift
[ $# -gt 0 ] || set -- hello.pvm master1
here=$(cd "$(dirname "$0")" && pwd)
rsh=$here/paranic-rsh
mkdir -p "$work" && cd "$work" || exit 1
export PVM_RSH="$rsh" PARANIC_PVM_TMP="$work/pvm" PVM_ALLOW_ROOT=1
prefix=${PARANIC_SOCK_HOSTNAME-pn-node}
{
	echo "* ep=${PVM_EP:-/usr/bin} dx=$(command -v pvmd || echo /usr/bin/pvmd)"
	i=0
	while [ $i -lt "$PARANIC_NODES" ]; do echo "$prefix$i"; i=$((i + 1)); done
} > hostfile
uid=$(id -u)
rm -rf "$PARANIC_PVM_TMP"

"$rsh" "${prefix}0" "exec pvmd $work/hostfile" > pvmd.out 2>&1 &
pvmd_pid=$!
fail() {
	echo "FAIL $*"
	if kill -0 "$pvmd_pid" 2> /dev/null; then   # (pvm would start a pvmd if none ran)
		"$rsh" "${prefix}0" 'echo halt | pvm' > /dev/null 2>&1
		sleep 1
		kill "$pvmd_pid" 2> /dev/null
	fi
	exit 1
}

n=0
deadline=$(( $(date +%s) + ${PVM_WAIT_S:-30} ))
until [ -e "$PARANIC_PVM_TMP/node0/pvmd.$uid" ]; do
	kill -0 "$pvmd_pid" 2> /dev/null || fail "pvmd exited: $(cat pvmd.out)"
	[ "$(date +%s)" -lt "$deadline" ] || fail "pvmd did not start"
	sleep 0.2
done
while :; do
	n=$("$rsh" "${prefix}0" 'echo conf | pvm' 2> /dev/null | grep -c "^ *$prefix[0-9]")
	[ "$n" -ge "$PARANIC_NODES" ] && break
	[ "$(date +%s)" -lt "$deadline" ] || fail "only $n of $PARANIC_NODES hosts joined"
	sleep 0.5
done
echo "hosts $n"
for p in "$@"; do
	echo "run $p"
	t0=$(date +%s%N)
	"$rsh" "${prefix}0" "$p" || fail "$p exited $?"
	echo "time $p ms $(( ($(date +%s%N) - t0) / 1000000 ))"
done
"$rsh" "${prefix}0" 'echo conf | pvm' 2>&1 | grep "$prefix"
"$rsh" "${prefix}0" 'echo halt | pvm' > /dev/null 2>&1
wait "$pvmd_pid"
echo "ok pvm"

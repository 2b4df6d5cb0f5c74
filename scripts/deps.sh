#!/usr/bin/env bash
# Install what ParaNIC needs on a Debian 12 machine: Debian packages (apt-get, needs
# root) and a .venv with the pinned Python packages of requirements.txt.
# Idempotent and quick when nothing is missing (a stamp records the last install).
set -euo pipefail
cd "$(dirname "$0")/.."

# Debian packages the build and tests use:
#  python3-venv python3-dev  the venv and libpython for cocotb's simulator plug-in
#  build-essential perl      g++/make for Verilator models, perl for the verilator script
#  iverilog                  Icarus, the second cocotb simulator
#  libevent-dev libjson-c-dev zlib1g-dev  LiteX's Verilator simulator
#  netpipe-tcp iperf3        programs the socket emulation carries (docs/sockets.md)
#  pvm pvm-dev pvm-examples  PVM over the socket emulation (docs/pvm.md)
#  linux-headers-amd64 sparse            build and check paranic.ko (docs/driver.md)
#  linux-image-amd64 qemu-system-x86 busybox-static cpio  the driver in a QEMU guest
#  valgrind                  instruction counts of the ports layer (tests)
#  yosys openfpgaloader      board resource reports and programming (docs/boards.md)
#  gcc-riscv64-unknown-elf   the SoC's VexRiscv firmware and LiteX's libraries (make firmware, docs/soc.md)
#  libfabric-dev libfabric-bin  the libfabric provider and fi_info (docs/fabric.md)
#  openmpi-bin libopenmpi-dev mpich libmpich-dev  MPI programs over ParaNIC (docs/mpi.md)
#  socat                     a forking TCP server the socket emulation carries (docs/sockets.md)
#  tcl                       tclsh: tests evaluate the HLS kernels' run_hls.tcl with stand-in Vitis commands (docs/hls.md)
APT_PACKAGES=(python3-venv python3-dev build-essential perl iverilog
              libevent-dev libjson-c-dev zlib1g-dev netpipe-tcp iperf3
              pvm pvm-dev pvm-examples linux-headers-amd64 sparse linux-image-amd64
              qemu-system-x86 busybox-static cpio valgrind yosys openfpgaloader
              gcc-riscv64-unknown-elf libfabric-dev libfabric-bin openmpi-bin
              libopenmpi-dev mpich libmpich-dev socat tcl
              # the fuzz harnesses (tests/fuzz): clang with its libFuzzer/ASan/UBSan runtimes
              clang libclang-rt-14-dev)

missing=()
for p in "${APT_PACKAGES[@]}"; do
  dpkg-query -W -f='${Status}' "$p" 2>/dev/null | grep -q "install ok installed" || missing+=("$p")
done
if [ ${#missing[@]} -gt 0 ]; then
  echo "deps: installing Debian packages: ${missing[*]}"
  if [ "$(id -u)" -eq 0 ]; then SUDO=""; elif command -v sudo >/dev/null; then SUDO="sudo"; else
    echo "deps: these Debian packages are missing and installing them needs root:" >&2
    echo "      apt-get install ${missing[*]}" >&2
    exit 1
  fi
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "${missing[@]}" >/dev/null
fi

PY=/usr/bin/python3
stamp=.venv/.paranic-deps
want="$(cat requirements.txt requirements-nodeps.txt pyproject.toml | sha256sum | cut -c1-16)"
if [ -x .venv/bin/python ] && [ -f "$stamp" ] && [ "$(cat "$stamp")" = "$want" ]; then
  exit 0
fi
echo "deps: creating .venv with the pinned Python packages (requirements.txt)"
[ -x .venv/bin/python ] || "$PY" -m venv .venv
.venv/bin/python -m pip install -q --upgrade "pip==25.3"
.venv/bin/python -m pip install -q -r requirements.txt
# Packages wanted only for files they carry (hls4ml: ap_types headers for the HLS C simulation).
.venv/bin/python -m pip install -q --no-deps -r requirements-nodeps.txt
.venv/bin/python -m pip install -q --no-deps -e .
echo "$want" > "$stamp"
echo "deps: ready"

# ParaNIC top-level Makefile. `make demo` and `make test` install what they need.
PY      := .venv/bin/python
PYTEST  := .venv/bin/pytest
PARANIC := .venv/bin/paranic

.PHONY: all deps test test-all fuzz demo bench headers clean help driver driver-sparse firmware \
        bitstream flash load resources lint-boards hls

help:
	@echo "make demo      the main job: ParaStation's benchmarks through libparanic on the simulated cluster"
	@echo "make test      run the test suite (fast tests; slow ones: make test-all)"
	@echo "make test-all  run every test, including the long adversarial runs"
	@echo "make fuzz [FUZZ_TIME=600] [FUZZERS=fuzz_daemon]  a fuzzing campaign of the wire parsers (tests/fuzz)"
	@echo "make bench     every benchmark and the demo, plots into docs/img (router, messages, barrier up to 16 nodes, layers, faults, ber, mpi)"
	@echo "make hls       the HLS kernels (hls/): C simulation here; csynth, cosim, IP export too where Vitis HLS is installed (docs/hls.md)"
	@echo "make headers   regenerate the C headers and doc tables generated from the spec (spec/)"
	@echo "make driver    build driver/paranic.ko (W=1, warnings fail; docs/driver.md)"
	@echo "make firmware  the SoC's VexRiscv firmware (firmware/, rv32im, LiteX's libs) for the ring and torus SoC nodes"
	@echo "make driver-sparse  the same under sparse"
	@echo "make bitstream BOARD=kc705 [LINKS=sfp,ribbon]  generate the board's gateware; runs Vivado if installed (docs/boards.md)"
	@echo "make load|flash BOARD=kc705  program the board with openFPGALoader (SRAM / SPI flash)"
	@echo "make resources  yosys resource report of every board and NicCore alone (slow: minutes per board)"
	@echo "make lint-boards  Verilator lint of every board's generated Verilog"
	@echo "make deps      install Debian packages (needs root) and the Python venv"

deps:
	@scripts/deps.sh

headers: deps
	$(PY) -m paranic.spec

# The HLS kernels (docs/hls.md): csim with g++ here; the full Vitis flow when vitis_hls or
# vitis-run is on PATH. It says which it ran and why.
hls: deps
	$(PY) -m paranic.hls

# The SoC's firmware against the simulator's SoC nodes (2 links: ring, 4: torus); the
# nodes' LiteX builds (headers, libraries) are made and cached by paranic.sim.socbuild.
firmware: deps
	$(MAKE) -C firmware LINKS=2 PY=$(abspath $(PY))
	$(MAKE) -C firmware LINKS=4 PY=$(abspath $(PY))

# paranic.ko against Debian's linux-headers-amd64 (driver/Makefile: KDIR, CSR_JSON, LINKS).
driver: deps
	$(MAKE) -C driver PY=$(abspath $(PY))

driver-sparse: deps
	$(MAKE) -C driver sparse PY=$(abspath $(PY))

# Test modules run on WORKERS processes (pytest-xdist; a module's tests stay on one worker,
# which owns its simulators; builds that workers share take a lock: paranic.sim.paths).
# make test ends with its 30 slowest steps (builds land in the first test that needs them).
WORKERS ?= 2
test: deps
	$(PYTEST) -q -n $(WORKERS) --dist loadfile --durations=30

test-all: deps
	$(PYTEST) -q -n $(WORKERS) --dist loadfile -m "slow or not slow"

# libFuzzer campaign of every wire parser, FUZZ_TIME seconds each (docs/reliability.md, "Fuzzing").
FUZZ_TIME ?= 600
fuzz: deps
	$(MAKE) -C tests/fuzz fuzz FUZZ_TIME=$(FUZZ_TIME) $(if $(FUZZERS),FUZZERS="$(FUZZERS)")

demo: deps
	$(PARANIC) demo

bench: deps
	$(PARANIC) bench router --plot docs/img/router.png
	$(PARANIC) bench messages --plot docs/img/messages.png
	$(PARANIC) bench overhead
	$(PARANIC) bench barrier --nodes 2,4,8,16 --plot docs/img/barrier.png
	$(PARANIC) bench layers --plot docs/img/layers.png
	$(PARANIC) bench faults --plot docs/img/faults.png
	$(PARANIC) bench ber --plot docs/img/ber.png
	$(PARANIC) bench mpi --plot docs/img/mpi.png
	$(PARANIC) bench collective --plot docs/img/bench-collective.png
	$(PARANIC) bench simspeed --split --topos ring:4,ring:8,torus:4x4 --threads 1,2,2w --plot docs/img/simspeed.png
	$(PARANIC) bench wide
	$(PARANIC) demo --img docs/img

# Boards (docs/boards.md). BOARD: kc705 kcu105 ac701 u250 stlv7325.
BOARDS := kc705 kcu105 ac701 u250 stlv7325
BOARD_MOD = $(shell $(PY) -c "from paranic.boards import BOARDS; print(BOARDS['$(BOARD)'])" 2>/dev/null)
LINKS ?=
LINKS_ARG = $(if $(LINKS),--links $(LINKS))

define need_board
	@test -n "$(BOARD)" || { echo "give BOARD=<one of: $(BOARDS)>" >&2; exit 2; }
	@test -n "$(BOARD_MOD)" || { echo "unknown BOARD=$(BOARD): one of $(BOARDS)" >&2; exit 2; }
endef

bitstream: deps
	$(need_board)
	$(PY) -m paranic.boards.$(BOARD_MOD) --build $(LINKS_ARG) --log-level warning

load: deps
	$(need_board)
	$(PY) -m paranic.boards.$(BOARD_MOD) --load --log-level warning

flash: deps
	$(need_board)
	$(PY) -m paranic.boards.$(BOARD_MOD) --flash --log-level warning

resources: deps
	$(PARANIC) boards report

lint-boards: deps
	@for b in $(BOARDS); do $(PARANIC) boards lint $$b || exit 1; done

clean:
	rm -rf build .pytest_cache

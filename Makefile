# ParaNIC top-level Makefile. `make demo` and `make test` install what they need.
PY      := .venv/bin/python
PYTEST  := .venv/bin/pytest
PARANIC := .venv/bin/paranic
HEADER  := userlib/include/paranic/pn_protocol.h

.PHONY: all deps test test-all demo bench headers clean help

help:
	@echo "make demo      run the main job (router benchmark on the simulated network)"
	@echo "make test      run the test suite (fast tests; slow ones: make test-all)"
	@echo "make test-all  run every test, including the long adversarial runs"
	@echo "make bench     run the benchmarks"
	@echo "make headers   regenerate $(HEADER) from paranic/protocol.py"
	@echo "make deps      install Debian packages (needs root) and the Python venv"

deps:
	@scripts/deps.sh

headers: deps
	$(PY) -m paranic.protocol --c-header $(HEADER) --doc docs/protocol.md

test: deps
	$(PYTEST) -q

test-all: deps
	$(PYTEST) -q -m "slow or not slow"

demo: deps
	$(PARANIC) bench router --plot docs/img/router.png

bench: deps
	$(PARANIC) bench router --plot docs/img/router.png

clean:
	rm -rf build .pytest_cache

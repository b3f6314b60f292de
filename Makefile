# Two commands do all the set-up on a fresh machine (see README.md):
#   make demo   installs the library into .venv and runs the main job through the C ABI
#   make test   installs it with the test tools and runs every test
PYTHON ?= python3
VENV ?= .venv
VPY := $(VENV)/bin/python

.PHONY: demo test install venv clean

$(VPY):
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip

venv: $(VPY)

install: $(VPY)
	$(VPY) -m pip install -q ".[test]"

demo: install
	mkdir -p build
	cc -std=c99 -Wall -Wextra -Werror -pedantic -o build/plan_host examples/plan_host.c \
	    $$($(VENV)/bin/turbospark-ffi config --cflags --libs)
	SAMPLES=$$($(VPY) -I -c "import turbospark_ffi, os; print(os.path.join(os.path.dirname(turbospark_ffi.__file__), 'samples'))" ) && \
	for opts in '{}' '{"speculativeDrafter": "dflash", "speculation": 2}' '{"speculation": 2}'; do \
	    build/plan_host "$$opts" $$SAMPLES/none $$SAMPLES/mtp $$SAMPLES/dflash $$SAMPLES/both || exit 1; \
	done

test: install
	$(VPY) -m pytest -q tests
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" bash swift/run-tests.sh

clean:
	rm -rf build $(VENV) turbospark_ffi/libturbospark_ffi.so turbospark_ffi/include

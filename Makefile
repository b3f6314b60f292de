# Two commands do all the set-up on a fresh machine (see README.md):
#   make demo   installs the library alone into .venv and runs the main job through the C ABI
#   make test   installs it with the test tools and runs every test
# and one runs the C-ABI and host tests on every other shared CPython found:
#   make test-pythons   (.ci/pythons; CI runs it too)
# and one needs a display:
#   make gui    builds the GTK 4 settings window (examples/gtk) and opens it
# and two are for macOS (a Mac's Python; docs/shipping.md):
#   make xcframework   writes swift/Tsffi.xcframework, the binary target Package.swift names
#   make release-zip   the same, and build/xcframework/Tsffi.xcframework.zip with its checksum
PYTHON ?= python3
VENV ?= .venv
VPY := $(VENV)/bin/python

.PHONY: demo test test-pythons gui install install-library venv clean xcframework release-zip

$(VPY):
	$(PYTHON) -m venv $(VENV)
	$(VPY) -m pip install -q --upgrade pip

venv: $(VPY)

install: $(VPY)
	$(VPY) -m pip install -q ".[test]"

# The demo needs the library and its cffi only, not the test tools (ziglang
# alone is 411 MB); it says so, since pip -q is silent for a while.
install-library: $(VPY)
	@echo "make demo: installing the library (and cffi) into $(VENV); the test tools come with make test"
	$(VPY) -m pip install -q .

demo: install-library
	mkdir -p build
	cc -std=c99 -Wall -Wextra -Werror -pedantic -o build/plan_host examples/plan_host.c \
	    $$($(VENV)/bin/turbospark-ffi config --cflags --libs)
	SAMPLES=$$($(VPY) -I -c "import turbospark_ffi, os; print(os.path.join(os.path.dirname(turbospark_ffi.__file__), 'samples'))" ) && \
	for opts in '{}' '{"speculativeDrafter": "dflash", "speculation": 2}' '{"speculation": 2}'; do \
	    build/plan_host "$$opts" $$SAMPLES/none $$SAMPLES/mtp $$SAMPLES/dflash $$SAMPLES/both || exit 1; \
	done

# The window loads the library at run time (dlopen), so it links only GTK and
# json-glib; it finds the library through the installed package's
# turbospark-ffi command, which PATH puts first.
GUI_PKGS := gtk4 json-glib-1.0 gio-unix-2.0

gui: install
	@if [ -z "$$DISPLAY$$WAYLAND_DISPLAY" ]; then \
	    echo "make gui opens a window and needs a display (DISPLAY or WAYLAND_DISPLAY)" >&2; exit 1; fi
	mkdir -p build
	cc -std=c11 -Wall -Wextra -Werror -pedantic -o build/tsffi-settings examples/gtk/tsffi_settings.c \
	    $$($(VENV)/bin/turbospark-ffi config --cflags) $$(pkg-config --cflags --libs $(GUI_PKGS)) -ldl
	SAMPLES=$$($(VPY) -I -c "import turbospark_ffi, os; print(os.path.join(os.path.dirname(turbospark_ffi.__file__), 'samples'))" ) && \
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" build/tsffi-settings --model $$SAMPLES/dflash

# On a Mac the manifests' binary target must exist before swift test; on
# Linux the Swift tests use the pkg-config system library and nothing is added.
test: install
	$(VPY) -m pytest -q tests
	@if [ "$$(uname -s)" = Darwin ]; then $(MAKE) xcframework; fi
	PATH="$(CURDIR)/$(VENV)/bin:$$PATH" bash swift/run-tests.sh

# EXCEPT=PYTHON leaves out that Python's X.Y (CI: the one make test used).
test-pythons:
	$(PYTHON) .ci/pythons $(if $(EXCEPT),--except $(EXCEPT))

# The XCFramework from this checkout's library and the venv's base Python
# (python.org's: universal2), universal: cffi's thin macOS wheels (one
# architecture each) joined by the bundle command (--cffi-wheel).
MAC_OUT := build/xcframework
CFFI_WHEELS := build/cffi-wheels

xcframework: install
	rm -rf $(CFFI_WHEELS) && mkdir -p $(CFFI_WHEELS)
	for platform in macosx_11_0_arm64 macosx_10_15_x86_64; do \
	    $(VPY) -m pip download -q --no-deps --only-binary=:all: --platform $$platform \
	        --python-version $$($(VPY) -I -c 'import sys; print("%d.%d" % sys.version_info[:2])') \
	        --implementation cp --dest $(CFFI_WHEELS) \
	        cffi==$$($(VPY) -I -c 'import cffi; print(cffi.__version__)') || exit 1; \
	done
	$(VENV)/bin/turbospark-ffi bundle $(MAC_OUT) --force $(RELEASE_FLAGS) \
	    $$(for wheel in $(CFFI_WHEELS)/*.whl; do printf -- '--cffi-wheel %s ' "$$wheel"; done)
	rm -rf swift/Tsffi.xcframework
	cp -R $(MAC_OUT)/Tsffi.xcframework swift/Tsffi.xcframework

release-zip:
	$(MAKE) xcframework RELEASE_FLAGS=--release-zip
	@echo "checksum: $$(cut -d' ' -f1 $(MAC_OUT)/Tsffi.xcframework.zip.sha256) (Package.swift's releaseChecksum)"

clean:
	rm -rf build $(VENV) turbospark_ffi/libtsffi.so turbospark_ffi/libtsffi.dylib turbospark_ffi/include

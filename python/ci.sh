#!/usr/bin/env bash
# The Python package's CI (docs/python.md): builds the wheel with maturin
# (dev profile, in the cargo target dir, so it reuses `cargo test`'s build),
# installs it into a fresh virtual environment and runs python/tests there
# against the binary the wheel installed. Needs python3 with venv and pip,
# and PyPI for maturin and pytest (pinned); where PyPI cannot be reached it
# says so and skips (exit 0).
set -euo pipefail
cd "$(dirname "$0")/.."
MATURIN_VERSION=1.16.0
PYTEST_VERSION=9.2.0

mkdir -p "${CARGO_TARGET_DIR:-target}"
TARGET=$(cd "${CARGO_TARGET_DIR:-target}" && pwd)
export CARGO_TARGET_DIR=$TARGET PYTHONDONTWRITEBYTECODE=1
PIP_FLAGS=(-q --disable-pip-version-check)

# The build tools, kept between runs in the target dir.
BUILD_VENV=$TARGET/py-build-venv
if ! "$BUILD_VENV/bin/maturin" --version 2>/dev/null | grep -qx "maturin $MATURIN_VERSION"; then
  installed=
  for attempt in 1 2; do
    rm -rf "$BUILD_VENV"
    if python3 -m venv "$BUILD_VENV" &&
      "$BUILD_VENV/bin/pip" install "${PIP_FLAGS[@]}" "maturin==$MATURIN_VERSION"; then
      installed=1
      break
    fi
    echo "python/ci: installing maturin failed (attempt $attempt)" >&2
  done
  if [ -z "$installed" ]; then
    echo "python/ci: maturin could not be installed from PyPI; the Python package's tests do not run" >&2
    exit 0
  fi
fi

# The wheel: the dev profile reuses the debug build of `cargo test`.
WHEELS=$TARGET/py-wheels
rm -rf "$WHEELS"
start=$(date +%s%N)
"$BUILD_VENV/bin/maturin" build --locked --profile dev --out "$WHEELS"
wheel=$(echo "$WHEELS"/dsh_exec-*.whl)
echo "python/ci: built $(basename "$wheel") in $((($(date +%s%N) - start) / 1000000)) ms" >&2

# A fresh environment with the wheel and pytest only.
TEST_VENV=$TARGET/py-test-venv
rm -rf "$TEST_VENV"
python3 -m venv "$TEST_VENV"
if ! "$TEST_VENV/bin/pip" install "${PIP_FLAGS[@]}" "pytest==$PYTEST_VERSION" "$wheel"; then
  echo "python/ci: pytest could not be installed from PyPI; the Python package's tests do not run" >&2
  exit 0
fi
# The module must come from the wheel, not from python/ in this tree.
where=$(cd / && "$TEST_VENV/bin/python" -c 'import dsh_exec; print(dsh_exec.__file__)')
case $where in
  "$TEST_VENV"/*) ;;
  *) echo "python/ci: dsh_exec imported from $where, not from the wheel" >&2; exit 1 ;;
esac
env -u DSH_EXEC_BIN "$TEST_VENV/bin/pytest" -p no:cacheprovider python/tests

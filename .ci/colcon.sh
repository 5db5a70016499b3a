#!/usr/bin/env bash
# Copyright 2026 rog_ros maintainers
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
#
# CI: `colcon build` + `colcon test` of this repository in a throw-away workspace, with Debian's
# colcon and ament packages (no ROS 2 install: interface generation is skipped, see
# CMakeLists.txt). Fails unless `colcon test-result` counts more than 0 tests and 0 failures.
# The pytest tests run with .venv/bin/python (torch) against the colcon-installed package.
set -euo pipefail
ROOT=$(cd "$(dirname "$0")/.." && pwd)

SUDO=''
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null; then SUDO='sudo'; fi
if command -v apt-get >/dev/null; then
  echo '== colcon and ament (Debian packages)'
  $SUDO apt-get install -y -qq --no-install-recommends cmake colcon python3-colcon-core \
    python3-colcon-cmake python3-colcon-ros python3-colcon-test-result \
    python3-colcon-output python3-colcon-package-selection python3-colcon-parallel-executor \
    python3-colcon-recursive-crawl python3-colcon-library-path python3-colcon-metadata \
    python3-colcon-package-information python3-colcon-defaults python3-colcon-bash \
    python3-colcon-python-setup-py ament-cmake ament-cmake-python ament-cmake-pytest \
    python3-ament-package ament-cmake-copyright ament-cmake-flake8 ament-cmake-pep257 \
    ament-cmake-lint-cmake python3-flake8-blind-except python3-flake8-builtins \
    python3-flake8-class-newline python3-flake8-comprehensions python3-flake8-deprecated \
    python3-flake8-docstrings python3-flake8-import-order python3-flake8-quotes >/dev/null
fi
command -v colcon >/dev/null || { echo 'error: colcon is not installed' >&2; exit 1; }

# ament's CMake code runs the system Python (it imports ament_package); the tests need torch.
SYSTEM_PY=/usr/bin/python3
[ -x "$SYSTEM_PY" ] || SYSTEM_PY=$(command -v python3)
TEST_PY=${ROG_ROS_TEST_PYTHON:-$ROOT/.venv/bin/python}

WS=$(mktemp -d /tmp/rog_colcon_ws.XXXXXX)
trap 'rm -rf "$WS"' EXIT
mkdir "$WS/src"
ln -s "$ROOT" "$WS/src/rog_ros"
cd "$WS"
echo "== colcon build ($WS)"
colcon build \
  --cmake-args "-DPython3_EXECUTABLE=$SYSTEM_PY" "-DROG_ROS_TEST_PYTHON=$TEST_PY"
echo '== colcon build with a rosidl test double (the Python install that ROS 2 machines do)'
CMAKE_PREFIX_PATH="$ROOT/test/rosidl_double${CMAKE_PREFIX_PATH:+:$CMAKE_PREFIX_PATH}" \
  colcon build --build-base build_rosidl --install-base install_rosidl \
  --cmake-args "-DPython3_EXECUTABLE=$SYSTEM_PY" -DBUILD_TESTING=OFF
INIT=$(find install_rosidl -path '*/rog_ros/__init__.py' -not -path '*/msg/*' -print -quit)
if ! grep -q 'Copyright' "$INIT" || ! grep -q GENERATED "$(dirname "$INIT")/msg/__init__.py"; then
  echo "error: with rosidl, the installed rog_ros must hold our modules and the generated msg/" >&2
  exit 1
fi
echo '== colcon test'
colcon test || true   # judged by test-result below
RESULT=$(colcon test-result --verbose 2>&1) || true
echo "$RESULT" | tail -n 40
SUMMARY=$(echo "$RESULT" | grep -E '^Summary: [0-9]+ tests' | tail -n 1) || true
read -r TESTS ERRORS FAILURES < <(echo "$SUMMARY" |
  sed -E 's/^Summary: ([0-9]+) tests, ([0-9]+) errors, ([0-9]+) failures.*/\1 \2 \3/')
if [ -z "${TESTS:-}" ] || [ "$TESTS" -eq 0 ] || [ "$ERRORS" -ne 0 ] || [ "$FAILURES" -ne 0 ]; then
  echo "error: colcon test-result: '${SUMMARY:-no summary}' (need > 0 tests, 0 errors, 0 failures)" >&2
  exit 1
fi
echo "== colcon test passed: $SUMMARY"

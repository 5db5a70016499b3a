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
# Set up rog_ros on a fresh Debian/Ubuntu machine with Python 3.11: system packages (best
# effort), a virtual environment in .venv with the pinned CPU PyTorch wheel first (so that no
# dependency range pulls a multi-GB CUDA build), then this package with its test extras.
# Safe to run again; takes about two minutes the first time.
set -euo pipefail
cd "$(dirname "$0")"

SUDO=''
if [ "$(id -u)" != 0 ] && command -v sudo >/dev/null; then SUDO='sudo'; fi
if command -v apt-get >/dev/null; then
  echo '== system packages (iproute2 for --netns, ament linters for the ROS 2 lint tests)'
  $SUDO apt-get update -qq || true
  $SUDO apt-get install -y -qq --no-install-recommends iproute2 python3-venv >/dev/null || \
    echo 'warning: could not install iproute2/python3-venv; --netns tests will be skipped'
  $SUDO apt-get install -y -qq --no-install-recommends python3-ament-flake8 \
    python3-ament-pep257 python3-ament-copyright python3-flake8-blind-except \
    python3-flake8-builtins python3-flake8-class-newline python3-flake8-comprehensions \
    python3-flake8-deprecated python3-flake8-docstrings python3-flake8-import-order \
    python3-flake8-quotes >/dev/null 2>&1 || \
    echo 'note: ament linters not available from apt here; lint tests will be skipped'
  # The Python 3.8 compatibility test (JetPack 5) needs a Python 3.8: pyenv's, or apt's where
  # the distribution has one (Ubuntu 20.04; Debian 12 has none: `pyenv install 3.8`).
  if ! ls "${PYENV_ROOT:-$HOME/.pyenv}"/versions/3.8*/bin/python3.8 >/dev/null 2>&1 && \
      ! command -v python3.8 >/dev/null; then
    $SUDO apt-get install -y -qq --no-install-recommends python3.8 python3.8-venv \
      >/dev/null 2>&1 || \
      echo 'note: no Python 3.8 here; test_py38_compat.py will skip the Python 3.8 import check'
  fi
fi

PY=${PYTHON:-python3}
if [ ! -x .venv/bin/python ]; then
  echo '== virtual environment .venv'
  "$PY" -m venv .venv
fi
echo '== PyTorch (pinned CPU wheel) and rog_ros'
.venv/bin/python -m pip install -q --upgrade pip >/dev/null 2>&1 || true
# The CPU build: this machine's own wheel (pip's find-links) when it has one, else PyTorch's
# CPU index; plain PyPI resolves torch==2.13.0 to the CUDA build (several GB of NVIDIA wheels).
# The last line adds torch's own dependencies; 2.13.0+cpu satisfies its pin.
if ! .venv/bin/python -m pip install -q --no-index --no-deps 'torch==2.13.0' >/dev/null 2>&1 &&
    ! .venv/bin/python -m pip install -q --no-deps 'torch==2.13.0' \
      --index-url https://download.pytorch.org/whl/cpu >/dev/null 2>&1; then
  echo 'note: no CPU wheel of torch 2.13.0 here or at download.pytorch.org; taking the index default'
fi
.venv/bin/python -m pip install -q 'torch==2.13.0'
# (setuptools warns on every editable install that a folder named like the package could
# shadow it: the package is that folder here, so the warning says nothing)
PYTHONWARNINGS='ignore::UserWarning:setuptools.command.editable_wheel' \
  .venv/bin/python -m pip install -q -e '.[test]'
echo '== ready: .venv/bin/rog --help'

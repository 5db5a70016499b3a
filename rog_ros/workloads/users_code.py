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
"""
Say where a user's own workload code failed: one line ending with their file and line.

A user's builder, loss or metric that raises deep inside torch leaves a traceback whose last
frame tells them nothing; the frame they wrote is the one outside torch, the standard library
and this package. Both the start-up check (``self_check``) and the training loop
(``Workload``) report a failure of the user's code this way.
"""

from __future__ import annotations

import os
import sys
import sysconfig
import traceback

import torch


def run_users_code(name: str, what: str, call):
    """
    Return ``call()``; what it raises becomes one ValueError line saying where.

    ``name``: the workload as the user named it; ``what``: what was being done
    (``evaluating the model``). The line ends with the user's file and line (`where`).
    """
    try:
        return call()
    except Exception as err:
        message = ' '.join(str(err).split()) or '(no message)'
        raise ValueError(f'workload {name}: {what} failed: {type(err).__name__}: '
                         f'{message}{where(err)}') from err


def where(err: BaseException) -> str:
    """
    Return `` (at FILE:LINE)`` of the deepest frame of ``err`` in the user's own code, or ''.

    The deepest frame is usually inside torch or the standard library, which tells a user
    nothing; the last one outside those (and outside this package) is the line they wrote.
    """
    skip = {os.path.dirname(os.path.dirname(os.path.abspath(__file__)))}
    for key in ('stdlib', 'platstdlib', 'purelib', 'platlib'):
        path = sysconfig.get_paths().get(key)
        if path:
            skip.add(os.path.abspath(path))
    skip.add(os.path.dirname(os.path.abspath(torch.__file__)))
    for prefix in {sys.prefix, sys.base_prefix, sys.exec_prefix}:
        skip.add(os.path.join(os.path.abspath(prefix), 'lib'))
    for frame in reversed(traceback.extract_tb(err.__traceback__)):
        path = os.path.abspath(frame.filename)
        if not frame.filename.startswith('<') and not any(
                path.startswith(s + os.sep) for s in skip):
            return f' (at {frame.filename}:{frame.lineno})'
    return ''

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
Run Python code in a fresh interpreter in which importing torch fails.

Processes that train nothing (netmon, the supervisors, launch processes, the fleet's own) must
not load torch: it costs seconds and a few hundred MB on a robot. The tests run their code
here, so that an import of torch anywhere on its path fails the test with its traceback.
"""

import subprocess
import sys

BLOCK_TORCH = """
import sys

class _NoTorch:
    def find_spec(self, name, path=None, target=None):
        if name == 'torch' or name.startswith('torch.'):
            raise ImportError('torch imported by a process that must not import it')

sys.meta_path.insert(0, _NoTorch())
"""


def run_without_torch(code: str, *args: str, **kwargs) -> subprocess.CompletedProcess:
    """Run ``code`` (after ``BLOCK_TORCH``) with ``args`` as ``sys.argv[1:]``; capture text."""
    return subprocess.run([sys.executable, '-c', BLOCK_TORCH + code, *args],
                          capture_output=True, text=True, **kwargs)

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
"""A comparison's meta records its budget and time; a rerun says which runs it reused."""

import json
import os
import re

from rog_ros.experiments.compare import compare

DOCS = os.path.join(os.path.dirname(__file__), '..', 'docs')


def _meta(out: str) -> dict:
    """Return the meta of the comparison summary in ``out``."""
    with open(os.path.join(out, 'summary.json')) as f:
        return json.load(f)['meta']


def test_meta_records_the_iteration_budget_and_every_key_is_documented(tmp_path):
    out = str(tmp_path / 'cmp')
    compare('toy', 'clean', ['bsp'], 2, [0], out, iterations=5, quiet=True)
    meta = _meta(out)
    assert meta['iteration_budget'] == 5
    with open(os.path.join(DOCS, 'outputs.md')) as f:
        documented = set(re.findall(r'`([A-Za-z_0-9]+)`', f.read()))
    assert sorted(set(meta) - documented) == []


def test_a_rerun_says_what_it_reused_and_keeps_the_comparisons_time(tmp_path, capsys):
    # Prepare: a finished comparison of one system and seed
    out = str(tmp_path / 'cmp')
    compare('toy', 'clean', ['bsp'], 2, [0], out, iterations=5)
    first = _meta(out)
    err = capsys.readouterr().err
    assert 'reused' not in err and first['runs_reused'] == 0
    assert first['wall_s'] == first['wall_s_this_call'] > 0
    # Execute: the same comparison with a second seed
    compare('toy', 'clean', ['bsp'], 2, [0, 1], out, iterations=5)
    # Assert: one line says what was reused; the bar counts only the run to run
    err = capsys.readouterr().err
    runs = os.path.join(out, 'runs')
    assert f'rog compare: 1 finished run in {runs} reused, 1 to run' in err
    assert '1/1' in err and '2/2' not in err
    second = _meta(out)
    assert second['runs_reused'] == 1
    assert abs(second['wall_s'] - (first['wall_s'] + second['wall_s_this_call'])) < 1e-6
    # Execute / Assert: everything reused, no progress bar, the time is kept
    compare('toy', 'clean', ['bsp'], 2, [0, 1], out, iterations=5)
    err = capsys.readouterr().err
    assert f'rog compare: 2 finished runs in {runs} reused, 0 to run' in err
    assert '0/0' not in err and 'run/s' not in err
    third = _meta(out)
    assert third['runs_reused'] == 2 and third['wall_s'] > second['wall_s']

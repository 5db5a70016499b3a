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
"""User documentation: links stay inside the repository, README starts with its two commands."""

from __future__ import annotations

from pathlib import Path
import re

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = sorted([ROOT / 'README.md', ROOT / 'docker' / 'README.md', *(ROOT / 'docs').glob('*.md')])
LINK = re.compile(r'\[[^\]]*\]\(([^)\s]+)\)')


@pytest.mark.parametrize('doc', DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_relative_links_point_to_files_in_the_repository(doc):
    # Execute
    broken = []
    for target in LINK.findall(doc.read_text()):
        if re.match(r'[a-z]+:', target) or target.startswith('#'):
            continue   # web pages and anchors
        path = (doc.parent / target.split('#')[0]).resolve()
        if ROOT not in path.parents or not path.exists():
            broken.append(target)
    # Assert
    assert not broken, f'{doc.name}: links outside the repository or to missing files: {broken}'


def test_user_docs_exist():
    names = {p.name for p in (ROOT / 'docs').glob('*.md')}
    assert {'architecture.md', 'robots.md', 'configuration.md', 'troubleshooting.md'} <= names


def test_readme_starts_with_the_install_and_test_commands():
    lines = (ROOT / 'README.md').read_text().splitlines()
    assert lines[2] == '```bash'
    assert lines[3].startswith('bash setup.sh && .venv/bin/rog fleet ')
    assert lines[4] == '.venv/bin/python -m pytest -q -n auto --dist loadgroup test/'
    run = (ROOT / '.ci' / 'run').read_text()
    assert 'bash setup.sh' in run and lines[4] in run


def test_readme_says_which_workload_each_command_trains_without_workload(capsys):
    # rog fleet trains toy without --workload, rog sim and rog compare mpcol: the README gave
    # every command with --workload, and said nothing of what runs without it
    from rog_ros import cli
    from rog_ros.nodes import settings
    readme = ' '.join((ROOT / 'README.md').read_text(encoding='utf-8').split())
    said = re.search(r'without `--workload`, `rog fleet` trains the small `(\w+)` model, while '
                     r'`rog sim` and `rog compare` default to `(\w+)`', readme)
    assert said, 'README does not say what rog fleet trains without --workload'
    assert said.group(1) == settings.defaults()['workload'] == 'toy'
    for command in ('sim', 'compare'):
        with pytest.raises(SystemExit):
            cli.main([command, '--help'])
        text = ' '.join(capsys.readouterr().out.split())
        assert f'(default {said.group(2)})' in text.split('--workload WORKLOAD', 2)[2][:200]

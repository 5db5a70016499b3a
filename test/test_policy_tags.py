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
"""System tags: named ablations and ``field=value`` policy settings in a system spec."""

import pytest
from rog_ros.protocol.policies import make_policy


def test_field_tags_set_policy_fields_and_chain_with_named_tags():
    p = make_policy('rog:4#deadline_floor=0.5#no-outage')
    assert p.deadline_floor == 0.5 and p.outage_aware is False
    assert p.staleness == 4 and p.momentum_compensation is True
    p = make_policy('rog:4#deadline-floor=0#momentum_compensation=false')
    assert p.deadline_floor == 0.0 and p.momentum_compensation is False
    assert make_policy('ssp:4#slots=3').slots == 3
    # an optional field: a number, or none for "not set"
    p = make_policy('rog:4#mta_override=1')
    assert p.mta_override == 1.0 and p.mta == 1.0 and make_policy('rog:4').mta < 1.0
    assert make_policy('rog:4#mta_override=none').mta_override is None


def test_plain_tags_stay_labels_and_explicit_overrides_win():
    assert make_policy('rog:4#run-a') == make_policy('rog:4')
    assert make_policy('rog:4#deadline_floor=1', deadline_floor=2.0).deadline_floor == 2.0


@pytest.mark.parametrize('spec,match', [
    ('rog:4#bogus=1', "unknown policy field 'bogus'"),
    ('rog:4#staleness=3', "unknown policy field 'staleness'"),   # use rog:3
    ('rog:4#deadline_floor=fast', "bad value 'fast' for deadline_floor"),
    ('rog:4#outage_aware=maybe', "bad value 'maybe' for outage_aware"),
    ('rog:4#slots=1.5', "bad value '1.5' for slots"),
    ('rog:4#deadline_floor=20', 'deadline_floor must be in'),      # the policy's own check
    ('rog:4#mta_override=all', "bad value 'all' for mta_override"),
    ('rog:4#mta_override=0', 'mta_override must be in'),
])
def test_bad_field_tags_are_refused_with_the_reason(spec, match):
    with pytest.raises(ValueError, match=match):
        make_policy(spec)

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
"""Stand-ins shared by the chaos tests that run a scenario on a fake fleet (no processes)."""


def run_on(fleet):
    """
    Return a stand-in for ``fleet_scenario`` that runs a scenario on ``fleet``.

    Why: the scenarios' decisions (what they inject, what their checks say) are tested on a
    fleet of recorded times; the stand-in runs ``inject`` and ``extra_check`` on it as
    ``chaos_fleet_scenario.fleet_scenario`` does, with the rest of a real run left out.
    """
    def scenario(name, cfg, inject, extra_check=None, **kwargs):
        """Run the scenario's inject and check on the fleet, as fleet_scenario does."""
        _, detail = inject(fleet)
        res = {'detail': detail}
        res['problems'] = extra_check(res, fleet)
        return res
    return scenario

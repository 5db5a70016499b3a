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
"""``rog report``: its options and command."""

from __future__ import annotations

import errno
import sys


def add_parser(sub) -> None:
    """Add ``rog report`` to the subcommands ``sub``."""
    p = sub.add_parser('report', allow_abbrev=False,
                       help='plots and a Markdown summary of a fleet or sim run',
                       description='Write report.md and PNG plots into RUN_DIR from every '
                                   'summary.json/timeseries.csv below it; with events.csv, '
                                   'also who was suspended, let go or readmitted, and when '
                                   '(membership.png). A rog compare folder gets its '
                                   'comparison report written again from its runs (RUN_DIR/'
                                   "runs: the runs' report, with membership.png). Runs of "
                                   'several settings (runs/cmp beside a fleet of another '
                                   'size) get a row per system and setting; rows of two '
                                   'comparisons get no ratios between them. Refused: a '
                                   'folder where one row (a system at one setting) would '
                                   'average runs of two comparisons, or of a comparison and '
                                   'runs outside it; the line names the row and the folders. '
                                   "A system's seed run twice below RUN_DIR counts once, the "
                                   'newest run (one warning line).')
    p.add_argument('run_dir', metavar='RUN_DIR', help='output directory of rog fleet, '
                   'rog_server, rog sim or rog compare')
    p.set_defaults(func=_cmd_report)


def _cmd_report(args) -> int:
    from rog_ros.experiments.comparison_folder import comparison_meta
    from rog_ros.experiments.comparison_report import report_comparison
    from rog_ros.experiments.report import report_run

    def say(line: str) -> None:
        """Print a warning line of the report (plots skipped, settings mixed) to stderr."""
        print(f'rog report: {line}', file=sys.stderr)
    try:
        if comparison_meta(args.run_dir) is not None:
            # a rog compare folder: its own report again (ratios, equal-time accuracy, the
            # header that explains the columns), not the generic one of the runs below it
            path = report_comparison(args.run_dir, say=say)
        else:
            path = report_run(args.run_dir, say=say)
    except OSError as err:
        print(f'rog report: {_os_error_line(err, args.run_dir)}', file=sys.stderr)
        return 2
    except ValueError as err:
        print(f'rog report: {err}', file=sys.stderr)
        return 2
    print(path)
    return 0


def _os_error_line(err: OSError, run_dir: str) -> str:
    """
    Say what a file error of the report means and what to do, in one line.

    It printed Python's text (``[Errno 30] Read-only file system: '.../accuracy_vs_time.png'``),
    which names neither the cause nor a way out: the report is written into RUN_DIR.
    """
    path = err.filename2 or err.filename
    what = err.strerror or str(err)
    if err.errno in (errno.EROFS, errno.EACCES, errno.EPERM):
        return (f'cannot write {path} ({what}): the report and its plots are written into '
                f'{run_dir}; make it writable, or copy the run to a folder you can write and '
                'report that')
    if err.errno in (errno.EISDIR, errno.ENOTDIR):
        kind = 'a folder' if err.errno == errno.EISDIR else 'under a file, not a folder'
        return f'{path} is {kind}, where the report reads or writes a file; move it away'
    return f'{path}: {what}' if path else what

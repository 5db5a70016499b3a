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
What a user sees of a ``rog fleet`` run: the live progress line and the closing result line.

The live line is fed by the fleet's TrainStatus and LinkStats topics (iteration, accuracy,
stall share, each link's measured and emulated rate); the result line is read from the run's
``summary.json`` and names what a robotics engineer should not miss (suspensions, straggler
slack, rejected messages); a last line points at warnings that only a robot's own log holds.
"""

from __future__ import annotations

import json
import math
import os
import re
import sys
import time

from rog_ros.protocol.messages import train_status_problem


def legend(emulated: bool) -> str:
    """
    Return the line that says once what the live line's fields mean.

    ``Mb/s w0 8.55/95.3`` was explained in a code comment only: a user read 95.3 as a rate
    robot 0 reached. ``emulated``: the links follow a trace (``--trace``), so each rate has
    the emulated one after it.
    """
    rates = ('Mb/s wK A/B: robot K moves A Mbit/s (its traffic, measured; not what its link '
             'could carry) over an emulated link (--trace) that allows B' if emulated else
             'Mb/s wK A: robot K moves A Mbit/s (its traffic, measured; not what its link '
             'could carry)')
    return ("progress: it = iterations done, acc = the shared model's accuracy, stall = share "
            f"of the robots' time spent waiting; {rates}")


def terminal_width(stream) -> int:
    """
    Return the columns a line on ``stream``'s terminal may fill without wrapping.

    The stream's own terminal first (stdout may be redirected while the line goes to a
    terminal on stderr), then ``$COLUMNS`` and stdout's as Python finds them, else 80; one
    column is left free, since a line that fills the last one wraps on some terminals (no
    floor: 20 columns on a 12-column terminal wrapped, leaving a stale row per update).
    """
    import shutil
    columns = 0
    if not os.environ.get('COLUMNS'):
        try:
            columns = os.get_terminal_size(stream.fileno()).columns
        except (AttributeError, OSError, ValueError):
            columns = 0
    columns = columns or shutil.get_terminal_size((80, 24)).columns
    return max(1, columns - 1)


class Progress:
    """The live line: iteration, accuracy, stall %, per-link throughput (measured/emulated)."""

    def __init__(self, n_workers: int, iterations: int, stream=sys.stderr):
        self.n, self.iterations, self.stream = n_workers, iterations, stream
        self.server = None
        self.workers = {}            # rank -> (t, bytes) newest and previous
        self.rate = {}               # rank -> measured Mbit/s
        self.emulated = {}           # rank -> emulated Mbit/s
        self.t0 = time.monotonic()
        self._shown = 0.0
        self._said = None            # (iteration, accuracy) of the last line written
        # no status says more (the budget, its slack; a push system's pushes of every robot)
        self._bound = int(iterations) * max(1, int(n_workers)) + 16 if iterations else None
        self.tty = stream.isatty()

    def on_status(self, msg) -> None:
        if train_status_problem(msg, self._bound) is not None:   # a worker's: the server's log
            return
        if msg.node < 0:
            self.server = msg
            return
        now, total = time.monotonic(), msg.bytes_up + msg.bytes_down
        last = self.workers.get(msg.node)
        if last is not None and now - last[0] >= 0.5:
            self.rate[msg.node] = 8e-6 * max(0, total - last[1]) / (now - last[0])
        if last is None or now - last[0] >= 0.5:
            self.workers[msg.node] = (now, total)

    def on_link(self, msg) -> None:
        if msg.emulated_mbps >= 0:
            self.emulated[msg.node] = msg.emulated_mbps

    def line(self, width: int | None = None) -> str:
        """
        Return the live line; :func:`legend` says what its fields mean.

        ``width`` (a terminal's columns) keeps it on one row: the bar goes first (``it N/M``
        says as much), then the robots' rates that do not fit end in ``...``; the seconds
        stay last. A longer line wraps, and the carriage return then redraws only its last
        row: on an 80-column terminal the README's three-robot fleet left one stale row per
        update.
        """
        s, elapsed = self.server, time.monotonic() - self.t0
        it, acc = self._progress()
        stall = 100.0 * s.stall_s / (self.n * elapsed) if s and elapsed > 0 else 0.0
        links = [f'w{r} {self.rate.get(r, 0.0):.3g}'
                 + (f'/{self.emulated[r]:.3g}' if r in self.emulated else '')
                 for r in range(self.n)]
        bar_w = 20
        done = int(bar_w * min(1.0, it / max(1, self.iterations)))
        bar = f'[{"#" * done}{"." * (bar_w - done)}] '
        head = f'it {it}/{self.iterations} acc {acc} stall {stall:.1f}% | Mb/s '
        tail = f' | {elapsed:.0f}s'
        for line in (bar + head + ' '.join(links) + tail, head + ' '.join(links) + tail):
            if width is None or len(line) <= width:
                return line
        room = width - len(head) - len(tail) - len('...')
        shown = []
        for link in links:
            if len(' '.join(shown + [link, ''])) > room:
                break
            shown.append(link)
        return (head + ' '.join(shown + ['...']) + tail)[:width]

    def _progress(self) -> tuple:
        """Return the iteration and the accuracy text the line shows: what the fleet did."""
        s = self.server
        return (s.iteration if s else 0,
                f'{s.accuracy:.3f}' if s and math.isfinite(s.accuracy) else '-')

    def show(self, force: bool = False) -> None:
        """
        Write the live line: in place on a terminal, else one line every 5 s.

        ``force`` (the fleet's last one, when it stops) writes it unless the last line
        written to a file or a pipe already showed this iteration and accuracy: the fleet
        that finished right after a periodic line printed ``it 100/100`` twice.
        """
        now = time.monotonic()
        if not force and now - self._shown < (0.5 if self.tty else 5.0):
            return
        if force and not self.tty and self._progress() == self._said:
            return
        self._shown, self._said = now, self._progress()
        if self.tty:
            width = terminal_width(self.stream)
            self.stream.write('\r' + self.line(width).ljust(width))
        else:
            self.stream.write(self.line() + '\n')
        self.stream.flush()

    def close(self) -> None:
        if self.tty:
            self.stream.write('\n')
            self.stream.flush()


def result_line(path: str) -> str:
    """
    One line of the run's results from its ``summary.json`` ('' when unreadable).

    Time to target with the target accuracy and the iteration that reached it, final
    accuracy and the largest accuracy dip after the target was first reached
    (``rog_ros.metrics.dip_after_target``), in points (a run that never reached it says so
    instead, and a run whose starting model was already at the target says that), and how
    long it trained; then what a
    robotics engineer should not miss in a run: robots suspended for a dead link
    (outage-aware RSP), robots given straggler slack for a slow one, and rejected messages,
    when there were any.
    """
    s = read_summary(path)
    if s is None:
        return ''

    def num(key, fmt, scale=1.0):
        v = s.get(key)
        return '-' if not isinstance(v, (int, float)) else format(v * scale, fmt)

    def iteration(key):         # a mean over robots: 60.3, not 60.3333; 30, not 30.0
        text = num(key, '.1f')
        return text[:-2] if text.endswith('.0') else text

    def dip(since):
        """Say the largest dip; one of 0 has no iteration worth naming (it is the first)."""
        if s.get('max_dip_after_target') == 0 and not s.get('max_dip_after_target_smoothed'):
            return f'no dip {since}'
        return (f'max dip {since} {num("max_dip_after_target", ".2f", 100.0)} points '
                f'(iteration {iteration("max_dip_at_iteration")}; smoothed over 3 '
                f'evaluations {num("max_dip_after_target_smoothed", ".2f", 100.0)})')

    failed = s.get('evaluation_errors')
    failed = failed if isinstance(failed, int) and failed > 0 else 0
    if failed and not s.get('evaluations'):
        reached = (f'no evaluation succeeded ({failed} failed, the first '
                   f'{s.get("evaluation_error") or "in the server log"}): the workload '
                   'cannot evaluate its model, so there is no accuracy to report')
    elif isinstance(s.get('time_to_target_s'), (int, float)) and \
            s.get('iterations_to_target') == 0:
        # the starting model's own evaluation reached it (--init-model of a trained run): a
        # time to target of 0.0 s said the fleet got there, and the dip counts from the start
        start = s.get('start_model')
        source = f' ({start["source"]})' if isinstance(start, dict) and start.get('source') \
            else ''
        reached = (f'the starting model{source} was already at the '
                   f'target accuracy {num("target_accuracy", ".4f")}, final accuracy '
                   f'{num("final_accuracy", ".4f")}, {dip("since the start")}')
    elif isinstance(s.get('time_to_target_s'), (int, float)):
        reached = (f'time to target {num("time_to_target_s", ".1f")} s (target accuracy '
                   f'{num("target_accuracy", ".4f")}, reached at iteration '
                   f'{iteration("iterations_to_target")}), '
                   f'final accuracy {num("final_accuracy", ".4f")}, '
                   f'{dip("after target")}')
    else:                       # (no time and no dip to give: say so in words)
        reached = (f'target accuracy {num("target_accuracy", ".4f")} not reached, '
                   f'final accuracy {num("final_accuracy", ".4f")}')
        final, target = s.get('final_accuracy'), s.get('target_accuracy')
        if (isinstance(final, (int, float)) and isinstance(target, (int, float))
                and final >= target):
            # time to target reads the moving average of 3 evaluations: a short run ends
            # above the target before that average gets there
            reached += (' (time to target reads the mean of the last 3 evaluations, still '
                        'below it at the end: run more iterations)')
    if failed and s.get('evaluations'):
        reached += (f' ({failed} evaluation{"s" if failed != 1 else ""} failed, the first '
                    f'{s.get("evaluation_error") or "in the server log"})')
    return (f'{reached}, trained for {num("sim_time_s", ".1f")} s'
            + ''.join(notable_clauses(s, os.path.join(os.path.dirname(path), 'events.csv'))))


def every_evaluation_failed(path: str) -> bool:
    """Tell whether the run of ``summary.json`` at ``path`` had evaluations and none worked."""
    s = read_summary(path) or {}
    failed = s.get('evaluation_errors')
    return isinstance(failed, int) and failed > 0 and not s.get('evaluations')


def read_summary(path: str) -> dict | None:
    """Return a run's ``summary.json`` at ``path`` (None: missing, unreadable, not an object)."""
    try:
        with open(path) as fh:
            s = json.load(fh)
    except (OSError, ValueError):
        return None
    return s if isinstance(s, dict) else None


def notable_clauses(summary: dict, events: str = 'events.csv') -> list:
    """
    Clauses for the result line: suspensions, straggler slack, robots let go and rejects.

    After the membership clauses, where to read when and why (``events``, the run's
    ``events.csv``: ``rog_ros.metrics``).
    """
    out = []
    n = summary.get('outage_suspensions')
    if isinstance(n, int) and n > 0:
        out.append(f'; {n} suspension{"s" if n != 1 else ""} of a robot for its link '
                   '(outage-aware RSP)')
    n = summary.get('too_slow_suspensions')
    if isinstance(n, int) and n > 0:
        out.append(f' ({n} of them for a link too slow for any slack: it ran free)')
    n, slack = summary.get('slack_raises'), summary.get('slack_final')
    if isinstance(n, int) and n > 0:
        out.append(f'; {n} straggler slack raise{"s" if n != 1 else ""} for a slow link '
                   f'(slack per robot at the end: {slack})')
    n = summary.get('workers_let_go')
    if isinstance(n, int) and n > 0:
        out.append(f'; {n} robot{"s" if n != 1 else ""} let go before the budget, silent for '
                   'good once the others had finished')
    ranks = summary.get('workers_incompatible')
    if isinstance(ranks, list) and ranks:
        them = 'them' if len(ranks) != 1 else 'it'
        out.append(f'; robot{"s" if len(ranks) != 1 else ""} {", ".join(map(str, ranks))} '
                   f'ran an incompatible rog_ros, so the fleet trained without {them}: '
                   f'upgrade {them} to this version')
    if out:
        out.append(f' (when and why: {events})')
    n = summary.get('rejects')
    if isinstance(n, int) and n > 0:
        out.append(f'; {n} message{"s" if n != 1 else ""} rejected (rejects_by_reason)')
    return out


def closing_lines(out: str, workload: str, log_dir: str, log_names, options=None) -> list:
    """
    Return the last lines of a finished run (``rog fleet``, ``rog robot --role server``).

    Where the summary is, the result line, the warnings of the named logs, the trained model
    and the report command. ``options``: the workload's builder options (a dict; None: those
    the run's summary.json records).
    """
    summary = os.path.join(out, 'summary.json')
    lines = [f'done; {summary}', result_line(summary), robot_warnings(log_dir, log_names)]
    return [line for line in lines if line] + output_lines(out, workload, options)


def output_lines(out: str, workload: str, options=None) -> list:
    """
    Return the closing lines on what a finished run left: the trained model, the report.

    The model's line names the Python call that loads it, with the workload's builder
    ``options`` (a dict; None: those the run's summary.json records) as keyword arguments:
    they may shape the model.
    """
    from rog_ros.nodes.model_file import MODEL_FILE
    lines = []
    model = os.path.join(out, MODEL_FILE)
    if options is None:
        options = _summary_options(os.path.join(out, 'summary.json'))
    if os.path.exists(model):
        kwargs = ''.join(f', {key}={value!r}' for key, value in (options or {}).items())
        lines.append(f'trained model (a state_dict): {model}; in Python: '
                     f'rog_ros.nodes.model_file.load_trained({workload!r}, {model!r}{kwargs})'
                     + _robots_hold_it(os.path.join(out, 'summary.json')))
    else:     # (a full disk: the server's log said so, the console did not)
        lines.append(f'WARNING: no trained model in {model}: the server could not write it '
                     '(its log, rog_server.log, says why); the robots that received the final '
                     'model hold it')
    lines.append('plots and a report (accuracy, time composition, who was out when): '
                 f'rog report {out}')
    return lines


def finished_lines(state_dir: str, done: dict, out: str, started: str = 'robot') -> list:
    """
    Say that the run in ``state_dir`` had finished, and where its results are.

    ``done``: :func:`state_dir.finished_run`'s answer; ``started``: what the command did not
    start (``rog fleet``: a robot, ``rog robot --role server``: a node). The nodes, started
    on that state, ended at once, after a progress line that never moved (``it 0/20 acc -``)
    and a ``done`` that named the earlier results as if this command had made them.
    """
    from rog_ros.nodes.state_dir import train_again
    where = done.get('out') or out
    summary = os.path.join(where, 'summary.json')
    lines = [f'the run in {state_dir} had already finished (checkpoint {done.get("checkpoint")}'
             f'): nothing to resume, so no {started} was started and nothing was written']
    if os.path.isfile(summary):
        lines += [f'its results are in {where}: {summary}', result_line(summary),
                  f'plots and a report: rog report {where}']
    else:
        lines.append(f'its results were written to {where}, which holds no summary.json now')
    lines.append(train_again(state_dir))
    return [line for line in lines if line]


def _summary_options(summary_path: str) -> dict:
    """Return the workload options a run's summary records ({} when none or unreadable)."""
    options = (read_summary(summary_path) or {}).get('workload_options')
    return options if isinstance(options, dict) else {}


def _robots_hold_it(summary_path: str) -> str:
    """Say how many robots left with that model (``final_model``); '' if the run says not."""
    s = read_summary(summary_path) or {}
    try:
        got, missed = int(s['final_model_delivered']), int(s['final_model_missed'])
    except (ValueError, KeyError, TypeError):
        return ''
    if not got and not missed:
        return ''
    lost = f' ({missed} stopped without it: see the warnings)' if missed else ''
    return f'; {got} of {got + missed} robots hold it{lost}'


# ``[WARNING] [1795950704.876] [rog_worker_0]: text`` (ours), ``[WARN] ...`` (rclpy)
_WARNING_LINE = re.compile(r'^\[(WARN|WARNING|ERROR|FATAL)\]\s+\[[^\]]*\]\s+\[[^\]]*\]:\s*(.*)$')


def _quoted(hits: list) -> str:
    """
    Return how the closing line quotes a log's warnings ``hits``: the first, cut to 120.

    A dropped message's line keeps its hint whole (up to 400): the authenticated bus says
    there what most likely made it fail (another key, ``robot_keys`` set otherwise), which
    is what the user needs; cut at 120 it said only ``bad_tag``.
    """
    from rog_ros.transport.auth_bus import DROP_LINE
    said = DROP_LINE.match(hits[0])
    limit = 400 if said and said.group(3) else 120
    return 'first: ' + (hits[0] if len(hits[0]) <= limit else hits[0][:limit - 3] + '...')


def robot_warnings(log_dir: str, names) -> str:
    """
    One line on the warnings in the robots' own logs ('' when none, or no log is readable).

    What a robot's engine notices (a non-finite gradient, messages it dropped and why) is said
    in that robot's log only: the run's ``events.csv`` is the server's. Names each log with
    warnings, how many, and the first of them (:func:`_quoted`), so that a user who reads
    only the console still learns that there is something to read.
    """
    found = []
    for name in names:
        try:
            with open(os.path.join(log_dir, f'{name}.log'), errors='replace') as fh:
                hits = [m.group(2) for m in map(_WARNING_LINE.match, fh) if m]
        except OSError:
            continue
        if hits:
            found.append(f'{name} {len(hits)} ({_quoted(hits)})')
    if not found:
        return ''
    return "warnings in the robots' logs: " + '; '.join(found) + f'; logs in {log_dir}'

"""`assay mcp log` (docs/log.md): the calls wrap decided, as a table, JSON lines or counts.

Parses, calls :mod:`assay.logs`, prints. Exit 0 (also when no call matched), 2 for a usage error
or a path that cannot be read; one line on stderr says how many lines were skipped and why.
"""

from __future__ import annotations

import os
import shutil
import sys
import time
from typing import Annotated

import cyclopts
from cyclopts import Parameter

from assay.cli.errors import Fatal, UsageError
from assay.cli.output import write_out


def _since(value: str | None, now: float) -> float | None:
    if value is None:
        return None
    from assay.logs.entries import epoch
    from assay.policy.durations import DurationError, parse_duration

    if value[:-1].isdigit() and value.endswith("d"):  # days, beyond the policy's units
        return now - int(value[:-1]) * 86400.0
    try:
        return now - parse_duration(value)
    except DurationError:
        pass
    at = epoch(value)
    if at is None:
        raise UsageError(f"--since {value!r}: give a duration (30m, 2h, 1d) or an RFC 3339 time with a zone")
    return at


def _split(values: list[str] | None) -> tuple[str, ...]:
    return tuple(v for value in values or () for v in value.split(",") if v)


def _width() -> int | None:
    if sys.stdout.isatty():
        return shutil.get_terminal_size().columns
    columns = os.environ.get("COLUMNS", "")
    return int(columns) if columns.isdigit() and int(columns) > 0 else None


def register(app: cyclopts.App, mcp: cyclopts.App) -> None:
    @mcp.command(name="log")
    def log_command(
        paths: Annotated[list[str] | None, Parameter(name="PATH")] = None,
        /,
        *,
        follow: Annotated[bool, Parameter(name=["--follow", "-f"], negative=())] = False,
        server: Annotated[list[str] | None, Parameter(name="--server")] = None,
        tool: Annotated[list[str] | None, Parameter(name="--tool")] = None,
        outcome: Annotated[list[str] | None, Parameter(name="--outcome")] = None,
        since: Annotated[str | None, Parameter(name="--since")] = None,
        json: Annotated[bool, Parameter(name="--json", negative=())] = False,
        stats: Annotated[bool, Parameter(name="--stats", negative=())] = False,
        state_dir: Annotated[str | None, Parameter(name="--state-dir")] = None,
    ) -> int:
        """Show the calls wrap decided: time, client/server, tool, outcome, reason code, rule, reason, arguments.

        Exit codes: 0 shown (also when no call matched); 2 usage error or a path that cannot be read.

        Parameters
        ----------
        paths
            Decision logs, audit logs, --decision-log-new files, or directories (their *.ndjson files). Default: the state directory (where the README's protect line puts the logs).
        follow
            Keep reading: show calls as they are appended, until interrupted.
        server
            Only these servers (--label; tool-name patterns such as 'git*'; repeat or comma-separate).
        tool
            Only these tools (tool-name patterns; repeat or comma-separate).
        outcome
            Only these outcomes: allow, allow_with_warning, deny, would_deny, an approval state (approved, declined, ...), or approval (any).
        since
            Only calls since this long ago (30m, 2h, 1d) or since an RFC 3339 time.
        json
            One JSON object per call (stable keys, docs/log.md), or per tool with --stats.
        stats
            Calls per tool and outcome instead of one line per call.
        state_dir
            The state directory read when no PATH is given (default: $ASSAY_STATE_DIR, else $XDG_STATE_HOME/assay, else ~/.local/state/assay).
        """
        from assay.logs.files import Counts, LogError, LogFile, follow_files, log_files, read_entries
        from assay.logs.view import Filter, Viewer
        from assay.sessions.paths import state_dir as resolve

        if follow and stats:
            raise UsageError("--follow and --stats do not go together")
        try:
            keep = Filter(_split(server), _split(tool), _split(outcome), _since(since, time.time()))
        except ValueError as exc:
            raise UsageError(f"--outcome: {exc}") from None
        given = list(paths or ())
        if not given:
            given = [resolve(state_dir, os.environ)]
            if not os.path.isdir(given[0]):
                raise UsageError(f"no logs in {given[0]} (it does not exist): give the log files or the --log-dir of protect")
        colour = sys.stdout.isatty() and not os.environ.get("NO_COLOR") and os.environ.get("TERM") != "dumb"
        mode = ("stats-json" if json else "stats") if stats else ("json" if json else "table")
        view = Viewer(keep, mode=mode, width=_width(), colour=colour)
        counts = Counts()
        readers: dict[str, LogFile] | None = {} if follow else None
        try:
            for entry in read_entries(log_files(given), counts, readers=readers):
                text = view.take(entry)
                if text and not write_out(text, flush=False):
                    return 0
            if not write_out(view.end_of_files()):
                return 0
            if readers is not None:
                import trio

                trio.run(follow_files, given, readers, counts, lambda entry: write_out(view.take(entry)))
        except LogError as exc:  # a log that cannot be read: a failure, not a usage error
            raise Fatal(str(exc)) from None
        finally:
            told = counts.summary()
            if told:
                sys.stderr.write(f"assay: {told}\n")
        return 0

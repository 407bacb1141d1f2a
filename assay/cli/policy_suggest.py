"""`assay mcp policy suggest` (docs/log.md, "assay mcp policy suggest"): a least-privilege policy
from the logs of an observed session. Parses, calls :mod:`assay.logs.suggest`, writes, prints.

Exit 0 written; 1 no policy could be suggested (no observed call, or one the result would deny);
2 a usage error, a log that cannot be read, or an output file that exists or cannot be made.
"""

from __future__ import annotations

import os
import sys
import time
from collections.abc import Iterator
from typing import TYPE_CHECKING, Annotated

from cyclopts import Parameter

from assay.cli.errors import Fatal, UsageError
from assay.cli.output import write_out

if TYPE_CHECKING:
    import cyclopts

    from assay.logs.entries import Entry


def _create_new(path: str, data: bytes) -> None:
    """``data`` into a new file ``path`` (never over an existing one, never through a symlink);
    on a failure nothing is left behind."""
    try:
        fd = os.open(
            path,
            os.O_WRONLY | os.O_CREAT | os.O_EXCL | getattr(os, "O_NOFOLLOW", 0) | getattr(os, "O_CLOEXEC", 0),
            0o644,
        )
    except FileExistsError:
        raise UsageError(f"{path} exists: give a new file to --out (the policy is never written over one)") from None
    except OSError as exc:
        raise Fatal(f"cannot create {path}: {exc.strerror or exc}") from None
    try:
        view = memoryview(data)
        while view:
            view = view[os.write(fd, view) :]
        os.fsync(fd)
    except OSError as exc:
        os.close(fd)
        os.unlink(path)
        raise Fatal(f"cannot write {path}: {exc.strerror or exc}") from None
    os.close(fd)


def register(policy: cyclopts.App) -> None:
    @policy.command(name="suggest")
    def suggest_command(
        logs: Annotated[list[str] | None, Parameter(name="LOG")] = None,
        /,
        *,
        out: Annotated[str | None, Parameter(name="--out")] = None,
        state_dir: Annotated[str | None, Parameter(name="--state-dir")] = None,
    ) -> int:
        """Write a least-privilege policy from the decision logs of an observed session.

        Allows the tools that were called (each by its exact name) and denies the rest, asks approval for tools annotated destructive (unless a client that called one cannot answer an approval: it declared no elicitation), confines path arguments to the directories the recorded calls used (needs protect or wrap --log-arguments; the file names each tool left unconfined, and why), and checks that replaying the logs against it denies no observed call. assay mcp policy --help says what each key of the file does.

        Exit codes: 0 written; 1 nothing to suggest, or the result would deny an observed call; 2 usage error, unreadable log, or --out exists.

        Parameters
        ----------
        logs
            Decision or audit logs, or directories (their *.ndjson files), as for assay mcp log. Default: the state directory.
        out
            The new policy file (never written over an existing file). Default: standard output.
        state_dir
            The state directory read when no LOG is given.
        """
        from assay.logs.entries import listed_tool
        from assay.logs.files import Counts, LogError, log_files, log_paths, read_entries
        from assay.logs.suggest import Observed, SuggestError, client_record, suggest
        from assay.logs.suggest_text import approval_summary
        from assay.logs.view import Filter, admitted
        from assay.policy.files import user_home

        counts, observed = Counts(), Observed()

        def listing(line: bytes) -> None:
            data = listed_tool(line)
            if data is not None:
                observed.listing(data)
                return
            facts = client_record(line)
            if facts is not None:
                observed.client(facts)

        try:
            files = log_files(log_paths(list(logs or ()), state_dir, os.environ))

            def calls() -> Iterator[Entry]:
                return admitted(read_entries(files, Counts()), Filter())

            for entry in admitted(read_entries(files, counts, other=listing), Filter()):
                observed.call(entry)
            stamp = time.strftime("%Y-%m-%d %H:%M:%S UTC", time.gmtime())
            header = [
                f"Suggested by `assay mcp policy suggest` on {stamp} from {observed.calls} observed call"
                f"{'s' if observed.calls != 1 else ''} in {len(files)} log file{'s' if len(files) != 1 else ''}.",
                "Least privilege: what the session used is allowed, everything else is denied.",
                "Read it before you use it: assay mcp policy --help says what each key does.",
            ]
            if not observed.with_arguments:
                header.append("No call had recorded arguments (protect or wrap ran without --log-arguments):")
                header.append("no path is confined.")
            result = suggest(observed, calls, home=user_home(), header=header)
        except LogError as exc:  # a log that cannot be read: a failure, not a usage error
            raise Fatal(str(exc)) from None
        except SuggestError as exc:
            sys.stderr.write(f"assay: {exc}\n")
            return 1
        finally:
            told = counts.summary()
            if told:
                sys.stderr.write(f"assay: {told}\n")
        if out is None:
            write_out(result.text)
        else:
            _create_new(out, result.text.encode())
        where = "standard output" if out is None else out
        sys.stderr.write(
            f"assay: wrote the policy to {where}; replayed {result.replayed} observed call"
            f"{'s' if result.replayed != 1 else ''} against it: none denied"
            f"{f', {result.approvals} need approval' if result.approvals else ''}\n"
        )
        for line in approval_summary(result.plan):
            sys.stderr.write(f"assay: {line}\n")
        return 0

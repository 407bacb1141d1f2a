"""Where a browser can be opened, and opening it (docs/auth.md, "Where a browser can be opened").

:func:`can_open` is the sound test wrap's ``--login auto`` starts from (sans-IO: the
environment and the platform are given): a browser can be opened when ``$BROWSER`` names one;
on macOS, unless this is an SSH session (``SSH_CONNECTION`` or ``SSH_TTY``: the browser would
open on a screen nobody there looks at); elsewhere when there is a graphical session
(``$DISPLAY`` or ``$WAYLAND_DISPLAY``) and ``xdg-open`` is on the ``PATH``.

:func:`open_url` runs the opener through :mod:`assay.proc` (like every child of assay): each
command of ``$BROWSER`` (separated by ``:``; ``%s`` stands for the URL, else the URL is added as
the last argument), else ``open`` (macOS) or ``xdg-open``. An opener that exits 0, or is still
running after a few seconds (a browser started in the foreground), opened it.
"""

from __future__ import annotations

import os
import shlex
import shutil
from collections.abc import Mapping

__all__ = ["OPENER_WAIT", "can_open", "commands", "open_url"]

OPENER_WAIT = 5.0  # seconds an opener gets to say whether it opened the URL


def _ssh(environ: Mapping[str, str]) -> bool:
    return bool(environ.get("SSH_CONNECTION") or environ.get("SSH_TTY"))


def can_open(environ: Mapping[str, str], platform: str, *, which: object = shutil.which) -> bool:
    """Whether a browser can be opened for a person on this machine (see the module docstring)."""
    if environ.get("BROWSER", "").strip():
        return True
    if platform == "darwin":
        return not _ssh(environ)
    if not (environ.get("DISPLAY") or environ.get("WAYLAND_DISPLAY")):
        return False
    return callable(which) and which("xdg-open", path=environ.get("PATH")) is not None


def commands(url: str, environ: Mapping[str, str], platform: str) -> list[list[str]]:
    """The command lines to try, in order, to open ``url``."""
    out: list[list[str]] = []
    for entry in environ.get("BROWSER", "").split(os.pathsep):
        try:
            words = shlex.split(entry)
        except ValueError:
            continue
        if not words:
            continue
        if any("%s" in w for w in words):
            out.append([w.replace("%s", url) for w in words])
        else:
            out.append([*words, url])
    if platform == "darwin" and not _ssh(environ):
        out.append(["open", url])
    elif environ.get("DISPLAY") or environ.get("WAYLAND_DISPLAY"):
        out.append(["xdg-open", url])
    return out


async def open_url(url: str, environ: Mapping[str, str], platform: str) -> bool:
    """Open ``url`` in a browser; whether one took it."""
    import trio

    from assay import proc

    for argv in commands(url, environ, platform):
        try:
            child = proc.spawn(
                argv, stdin=proc.DEVNULL, stdout=proc.DEVNULL, stderr=proc.DEVNULL, env=dict(environ), own_group=True
            )
        except proc.SpawnError:
            continue
        with trio.move_on_after(OPENER_WAIT):
            code = await child.wait()
            if code == 0:
                return True
            continue
        return True  # still running: a browser in the foreground has the URL
    return False

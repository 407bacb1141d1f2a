"""A real Postgres for the tests (docs/serve.md, "Several replicas"): ``initdb`` into a temporary
directory and ``postgres`` on 127.0.0.1 at a free port, one per test session (each xdist worker
has its own), a fresh database per test (:meth:`PgServer.database`). Started when a test first
asks for it (the ``postgres`` fixture in tests/conftest.py), stopped at the end of the session.

The binaries come from PATH or /usr/lib/postgresql/*/bin (``./dev test`` installs Debian's
postgresql when neither has them). ``initdb`` and ``postgres`` refuse to run as root: then they
run as the ``postgres`` user (or ``nobody``) through ``setpriv``. Waiting for the server is
waiting for its "ready to accept connections" line, never a sleep."""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import signal
import socket
import subprocess
import tempfile
import threading
from dataclasses import dataclass, field
from pathlib import Path

USER = "assay"
PASSWORD = "assay-test-password"  # the test server's, over TCP with scram-sha-256
START_TIMEOUT = 60.0


def binary(name: str) -> str | None:
    """``name`` on PATH, or in the newest /usr/lib/postgresql/*/bin."""
    found = shutil.which(name)
    if found:
        return found
    for directory in sorted(
        glob.glob("/usr/lib/postgresql/*/bin"), key=lambda d: int(Path(d).parent.name), reverse=True
    ):
        path = os.path.join(directory, name)
        if os.access(path, os.X_OK):
            return path
    return None


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


def _as_user() -> tuple[list[str], int, int] | None:
    """The command prefix that drops root (and the uid and gid), or None when not root."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            entry = pwd.getpwnam(name)
        except KeyError:
            continue
        prefix = ["setpriv", f"--reuid={entry.pw_uid}", f"--regid={entry.pw_gid}", "--clear-groups"]
        return prefix, entry.pw_uid, entry.pw_gid
    raise RuntimeError("running as root and there is no postgres or nobody user to run Postgres as")


@dataclass
class PgServer:
    """One Postgres cluster in ``root`` at ``port`` on 127.0.0.1 (superuser ``assay`` with
    :data:`PASSWORD`). :meth:`stop` and :meth:`start` stop it and start it again (the same data,
    the same port)."""

    root: str
    port: int
    prefix: list[str]
    process: subprocess.Popen[bytes] | None = None
    log: list[str] = field(default_factory=list)
    made: int = 0

    @property
    def data(self) -> str:
        return os.path.join(self.root, "data")

    def url(self, db: str = "postgres") -> str:
        return f"postgresql://{USER}@127.0.0.1:{self.port}/{db}"

    def start(self) -> None:
        postgres = binary("postgres")
        assert postgres is not None
        ready = threading.Event()
        process = subprocess.Popen(
            [
                *self.prefix,
                postgres,
                "-D",
                self.data,
                "-k",
                self.root,
                "-p",
                str(self.port),
                "-c",
                "listen_addresses=127.0.0.1",
                "-c",
                "fsync=off",
                "-c",
                "synchronous_commit=off",
                "-c",
                "full_page_writes=off",
                "-c",
                "max_connections=200",
            ],
            stdin=subprocess.DEVNULL,
            stdout=subprocess.DEVNULL,
            stderr=subprocess.PIPE,
            start_new_session=True,
        )
        self.process = process

        def drain() -> None:
            assert process.stderr is not None
            for raw in process.stderr:
                line = raw.decode(errors="replace").rstrip()
                self.log.append(line)
                del self.log[:-200]
                if "ready to accept connections" in line:
                    ready.set()
            ready.set()  # it ended

        threading.Thread(target=drain, daemon=True).start()
        if not ready.wait(START_TIMEOUT) or process.poll() is not None:
            self.stop()
            raise RuntimeError("postgres did not start:\n" + "\n".join(self.log[-20:]))

    def stop(self) -> None:
        """Stop the server (a fast shutdown: the clients' connections are closed)."""
        process, self.process = self.process, None
        if process is None:
            return
        if process.poll() is None:
            process.send_signal(signal.SIGINT)
            try:
                process.wait(30)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()

    def admin(self):  # type: ignore[no-untyped-def]
        import psycopg

        return psycopg.connect(self.url(), password=PASSWORD, autocommit=True)

    def database(self, migrated: bool = True) -> str:
        """A new empty database's URL; ``migrated``: with the sessions' schema (as ``--migrate``
        leaves it)."""
        self.made += 1
        name = f"t{os.getpid()}_{self.made}"
        with self.admin() as conn:
            conn.execute(f"CREATE DATABASE {name}".encode())
        url = self.url(name)
        if migrated:
            from assay.store.postgres import PostgresDatabase

            PostgresDatabase(url, PASSWORD).migrate_blocking()
        return url


def start_server() -> PgServer:
    """initdb and start a cluster; raises RuntimeError naming what is missing."""
    initdb = binary("initdb")
    if initdb is None or binary("postgres") is None:
        raise RuntimeError("no Postgres binaries (initdb, postgres): ./dev test installs Debian's postgresql")
    dropped = _as_user()
    root = tempfile.mkdtemp(prefix="assay-pg-")
    prefix: list[str] = []
    if dropped is not None:
        prefix, uid, gid = dropped
        os.chown(root, uid, gid)
    os.chmod(root, 0o700)
    pwfile = os.path.join(root, "pw")
    with open(pwfile, "w") as fh:
        fh.write(PASSWORD + "\n")
    if dropped is not None:
        os.chown(pwfile, dropped[1], dropped[2])
    done = subprocess.run(
        [
            *prefix,
            initdb,
            "-D",
            os.path.join(root, "data"),
            "-U",
            USER,
            f"--pwfile={pwfile}",
            "--auth-local=trust",
            "--auth-host=scram-sha-256",
            "--encoding=UTF8",
            "--no-sync",
        ],
        capture_output=True,
        cwd=root,
        timeout=120,
    )
    if done.returncode != 0:
        shutil.rmtree(root, ignore_errors=True)
        raise RuntimeError("initdb failed: " + done.stderr.decode(errors="replace")[-2000:])
    server = PgServer(root=root, port=_free_port(), prefix=prefix)
    server.start()
    return server


def stop_server(server: PgServer) -> None:
    server.stop()
    shutil.rmtree(server.root, ignore_errors=True)

"""A throwaway PostgreSQL cluster for tests and benchmarks: a real server, never a mock.

PostgreSQL refuses to run as root, so when the tests run as root the cluster
lives in a temporary directory owned by the ``postgres`` system user and every
server command runs through ``runuser -u postgres``. The server listens on a Unix
socket only (``listen_addresses=''``), in the same temporary directory.

A missing server is an error naming the package to install, never a skip:
``apt-get install -y postgresql`` (Debian puts ``initdb`` and ``pg_ctl`` under
``/usr/lib/postgresql/<version>/bin``, off ``PATH``).
"""

from __future__ import annotations

import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import uuid
from collections.abc import Sequence
from pathlib import Path

__all__ = ["Cluster", "PostgresMissing", "find_server_bin", "fresh_url", "shared_cluster",
           "stop_shared"]

INSTALL_HINT = (
    "PostgreSQL's server is not installed: the PostgreSQL tests need a real server. "
    "Install it with `apt-get update && apt-get install -y postgresql` "
    "(Debian's package; .ci/run does this when initdb is missing)."
)


class PostgresMissing(RuntimeError):
    """No working ``initdb``/``pg_ctl`` on this machine."""


def _works(initdb: str, as_postgres: bool) -> bool:
    cmd = (["runuser", "-u", "postgres", "--"] if as_postgres else []) + [initdb, "--version"]
    try:
        return subprocess.run(cmd, capture_output=True, timeout=60).returncode == 0
    except (OSError, subprocess.TimeoutExpired):
        return False


def find_server_bin(as_postgres: bool) -> Path:
    """The directory holding a working ``initdb`` and ``pg_ctl``."""
    candidates = [shutil.which("initdb"), *sorted(glob.glob("/usr/lib/postgresql/*/bin/initdb"),
                                                  reverse=True)]
    for found in candidates:
        if not found:
            continue
        real = Path(os.path.realpath(found))
        if (real.parent / "pg_ctl").exists() and _works(str(real), as_postgres):
            return real.parent
    raise PostgresMissing(INSTALL_HINT)


class Cluster:
    """One initdb'd, started PostgreSQL server in a temporary directory; :meth:`stop` removes it.

    ``url(db)`` is a libpq URL over the Unix socket; :meth:`create_database` makes a
    fresh database. ``fsync=False`` (tests) trades durability for speed on a
    throwaway cluster; benchmarks keep it on.
    """

    def __init__(self, *, fsync: bool = True, settings: Sequence[str] = ()) -> None:
        self.as_postgres = os.geteuid() == 0
        self.bin = find_server_bin(self.as_postgres)
        self.root = Path(tempfile.mkdtemp(prefix="turnlog-pg-"))
        self.data = self.root / "data"
        self.socket_dir = str(self.root)
        self.user = "postgres" if self.as_postgres else pwd.getpwuid(os.geteuid()).pw_name
        if self.as_postgres:
            os.chown(self.root, pwd.getpwnam("postgres").pw_uid, -1)
        os.chmod(self.root, 0o755)
        self._run("initdb", "-D", str(self.data), "-A", "trust", "-U", self.user,
                  "-E", "UTF8", "--locale=C", "--no-sync")
        options = [f"-k {self.socket_dir}", "-c listen_addresses=''", "-c max_connections=200"]
        if not fsync:
            options += ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]
        options += [f"-c {setting}" for setting in settings]
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "server.log"), "-w",
                  "-t", "120", "-o", " ".join(options), "start")
        self.started = True

    def _run(self, program: str, *args: str) -> None:
        cmd = [str(self.bin / program), *args]
        if self.as_postgres:
            cmd = ["runuser", "-u", "postgres", "--", *cmd]
        done = subprocess.run(cmd, capture_output=True, text=True, timeout=300)
        if done.returncode != 0:
            log = self.root / "server.log"
            tail = log.read_text(errors="replace")[-2000:] if log.exists() else ""
            raise RuntimeError(f"{' '.join(cmd)} failed ({done.returncode}): "
                               f"{done.stdout}{done.stderr}{tail}")

    def url(self, database: str = "postgres") -> str:
        """A ``postgresql://`` URL for ``database`` over the Unix socket."""
        return f"postgresql://{self.user}@/{database}?host={self.socket_dir}"

    def create_database(self, name: str | None = None) -> str:
        """Create a fresh database; return its URL."""
        import psycopg

        name = name or f"t_{uuid.uuid4().hex[:12]}"
        with psycopg.connect(self.url(), autocommit=True) as conn:
            conn.execute(f'CREATE DATABASE "{name}"')
        return self.url(name)

    def restart(self) -> None:
        """Stop the server (fast: every connection is cut) and start it again."""
        self._run("pg_ctl", "-D", str(self.data), "-l", str(self.root / "server.log"), "-m", "fast",
                  "-w", "restart")

    def stop(self) -> None:
        """Stop the server and remove its directory."""
        if self.started:
            self.started = False
            try:
                self._run("pg_ctl", "-D", str(self.data), "-m", "immediate", "-w", "stop")
            finally:
                shutil.rmtree(self.root, ignore_errors=True)


_SHARED: list[Cluster] = []


def shared_cluster() -> Cluster:
    """This test process's cluster, started on first use (``stop_shared`` ends it)."""
    if not _SHARED:
        cluster = Cluster(fsync=False)
        try:
            cluster.create_database("turnlog_tests")
        except BaseException:
            cluster.stop()
            raise
        _SHARED.append(cluster)
    return _SHARED[0]


def stop_shared() -> None:
    """Stop the shared cluster if this process started one."""
    while _SHARED:
        _SHARED.pop().stop()


def fresh_url() -> str:
    """The URL of a new, empty schema in the shared cluster's test database."""
    import psycopg

    cluster = shared_cluster()
    schema = f"j_{uuid.uuid4().hex[:16]}"
    with psycopg.connect(cluster.url("turnlog_tests"), autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    return f"{cluster.url('turnlog_tests')}&options=-csearch_path%3D{schema}"

"""A MariaDB server of the fault runner's own, so that ``mariadb-restart`` can kill it and
start it again without touching a server anyone else uses.

``mariadb-install-db`` makes a fresh data directory in a temporary folder; ``mariadbd``
serves it on a free port of 127.0.0.1 and a socket of its own, with no option file read
(``--no-defaults``: nothing of the machine's own server leaks in), as the current user
(``--user`` is needed only when that is root, which ``mariadbd`` otherwise refuses).
Commits are durable as a deployed server's are (``innodb_flush_log_at_trx_commit=1``, the
default), so that a kill shows what a crash keeps: every transaction whose COMMIT was
answered, and none of the others.
"""

from __future__ import annotations

import getpass
import os
import shutil
import signal
import subprocess
import tempfile
import time
from pathlib import Path

from locking.testing import free_port


def binary(*names: str) -> str:
    for name in names:
        found = shutil.which(name) or next(
            (str(Path(folder) / name) for folder in ("/usr/sbin", "/usr/local/sbin") if (Path(folder) / name).exists()),
            None,
        )
        if found:
            return found
    raise SystemExit(f"[faults] none of {', '.join(names)} is installed: mariadb-restart needs a MariaDB server")


class MariaDBServer:
    """One ``mariadbd`` on 127.0.0.1 over a data directory of its own; ``stop`` kills it as
    a crash would (SIGKILL), ``start`` starts it again on the same port and data, which
    InnoDB recovers; ``close`` shuts it down and removes everything."""

    def __init__(self, port: int | None = None) -> None:
        self.port = port or free_port()
        self._folder = Path(tempfile.mkdtemp(prefix="faults-mariadb-"))
        self.datadir = self._folder / "data"
        self.socket = self._folder / "mariadb.sock"
        self.log = self._folder / "error.log"
        self._process: subprocess.Popen | None = None
        self._installed = False

    def url(self, name: str) -> str:
        return f"mysql://root:@127.0.0.1:{self.port}/{name}"

    def _user_options(self) -> list[str]:
        return ["--user=" + getpass.getuser()] if os.geteuid() == 0 else []

    def install(self) -> None:
        completed = subprocess.run(
            [binary("mariadb-install-db", "mysql_install_db"), "--no-defaults", f"--datadir={self.datadir}",
             "--auth-root-authentication-method=normal", "--skip-test-db", *self._user_options()],
            capture_output=True, text=True,
        )  # fmt: skip
        if completed.returncode != 0:
            raise RuntimeError(f"mariadb-install-db failed: {completed.stdout[-2000:]}{completed.stderr[-2000:]}")
        self._installed = True

    def start(self, timeout: float = 60) -> MariaDBServer:
        if not self._installed:
            self.install()
        self._process = subprocess.Popen(
            [binary("mariadbd", "mysqld"), "--no-defaults", f"--datadir={self.datadir}", f"--port={self.port}",
             "--bind-address=127.0.0.1", f"--socket={self.socket}", f"--pid-file={self._folder / 'mariadb.pid'}",
             f"--log-error={self.log}", "--skip-log-bin", "--skip-name-resolve", "--innodb-buffer-pool-size=256M",
             "--max-connections=500", *self._user_options()],
            stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
        )  # fmt: skip
        self._wait_ready(timeout)
        return self

    def _wait_ready(self, timeout: float) -> None:
        import MySQLdb

        give_up = time.monotonic() + timeout
        while True:
            try:
                MySQLdb.connect(host="127.0.0.1", port=self.port, user="root", connect_timeout=1).close()
                return
            except MySQLdb.OperationalError:
                if self._process.poll() is not None or time.monotonic() > give_up:
                    tail = self.log.read_text()[-3000:] if self.log.exists() else ""
                    raise RuntimeError(f"mariadbd on port {self.port} did not start:\n{tail}") from None
                time.sleep(0.05)

    def stop(self) -> None:
        """SIGKILL: no shutdown, no flush; what a crash or a lost machine does."""
        if self._process is not None and self._process.poll() is None:
            self._process.send_signal(signal.SIGKILL)
            self._process.wait(30)
        self._process = None

    @property
    def running(self) -> bool:
        return self._process is not None and self._process.poll() is None

    def close(self) -> None:
        if self._process is not None and self._process.poll() is None:
            self._process.terminate()  # a clean shutdown
            try:
                self._process.wait(60)
            except subprocess.TimeoutExpired:
                self._process.kill()
                self._process.wait(10)
        self._process = None
        shutil.rmtree(self._folder, ignore_errors=True)

"""veil-server processes on loopback (two for dpf2, one for a single-server protocol), for tests,
notebooks and examples.

A deployment runs each server on its own machine under a supervisor (see docs/); this helper is
the Python counterpart of tools/launcher.h: it starts ``veil-server`` (this build's, or
`binary`), waits for the port it prints on its first line of output, and stops it with SIGTERM.
Each server also stops when this process goes, however it ends (an exception, SIGKILL, a notebook
kernel restarted): it runs with ``--stop_on_stdin_eof`` and its stdin is a pipe whose only write
end this process holds.
"""

from __future__ import annotations

import os
import select
import shutil
import signal
import subprocess
import tempfile
import time
from typing import Any, List, Optional, Sequence, Tuple

from veil import _build
from veil._errors import NotFoundError, StatusCode, UnavailableError
from veil.client import Client


def _binary(name: str, given: Optional[str]) -> str:
    path = given or os.environ.get("VEIL_" + name.upper().replace("-", "_"))
    if not path:
        path = os.path.join(_build.BIN_DIR, name)
        if not os.path.exists(path):
            path = shutil.which(name) or path
    if not os.path.exists(path):
        raise NotFoundError(StatusCode.NOT_FOUND, f"{name} not found at {path}: build it "
                            "(scripts/build) or pass its path")
    return path


class LocalServers:
    """Party 0 and party 1 serving `table` on 127.0.0.1 (free ports), plaintext or, with
    ``tls=True``, TLS with a fresh self-signed certificate for 127.0.0.1 (``veil tls-cert``).
    With ``protocol="lwe-simple"``, ``"lwe-double"``, ``"lwe-exppack-s"``, ``"lwe-exppack-d"``,
    ``"lwe-hybrid"`` or ``"lwe-double-pack"``: one server of that protocol.

    Use as a context manager; ``addresses`` are the two "HOST:PORT" strings, ``tls_certs`` the
    PEM file a client trusts (None without TLS), ``client()`` a connected :class:`veil.Client`.
    Raises UnavailableError (with the server's log) if a server exits or stays silent.
    """

    def __init__(
        self,
        table: str,
        *,
        tls: bool = False,
        backend: str = "cpu",
        threads: int = 1,
        protocol: str = "dpf2",
        extra_args: Sequence[str] = (),
        binary: Optional[str] = None,
        work_dir: Optional[str] = None,
        start_timeout: float = 30.0,
    ) -> None:
        self.table = os.fspath(table)
        self._server = _binary("veil-server", binary)
        self._tmp = None if work_dir else tempfile.TemporaryDirectory(prefix="veil-servers-")
        self.work_dir = work_dir or self._tmp.name
        os.makedirs(self.work_dir, exist_ok=True)
        self._processes: List[subprocess.Popen] = []
        self._ports: List[int] = []
        self.tls_certs: Optional[str] = None
        tls_args: List[str] = []
        if tls:
            cert_dir = os.path.join(self.work_dir, "tls")
            subprocess.run([_binary("veil", None), "tls-cert", f"--out-dir={cert_dir}",
                            "--hosts=127.0.0.1"], check=True, capture_output=True)
            self.tls_certs = os.path.join(cert_dir, "server.pem")
            tls_args = [f"--tls_cert={self.tls_certs}",
                        f"--tls_key={os.path.join(cert_dir, 'server.key')}"]
        self.protocol = protocol
        try:
            # dpf2: parties 0 and 1; a single-server protocol: one server.
            for party in ((0, 1) if protocol == "dpf2" else (None,)):
                self._start(party, [f"--protocol={protocol}", f"--backend={backend}",
                                    f"--threads={threads}", *tls_args, *extra_args],
                            start_timeout)
        except BaseException:
            self.stop()
            raise

    def _start(self, party: Optional[int], args: List[str], timeout: float) -> None:
        log_path = os.path.join(self.work_dir, f"server{party or 0}.log")
        party_args = [] if party is None else [f"--party={party}"]
        with open(log_path, "wb") as log:
            process = subprocess.Popen(
                [self._server, *party_args, f"--table={self.table}",
                 "--listen=127.0.0.1:0", "--stop_on_stdin_eof", *args],
                stdout=subprocess.PIPE, stderr=log, stdin=subprocess.PIPE)
        self._processes.append(process)
        line = b""
        deadline = time.monotonic() + timeout
        while b"\n" not in line and time.monotonic() < deadline:
            ready, _, _ = select.select([process.stdout], [], [], max(0.0, deadline - time.monotonic()))
            if not ready:
                break
            chunk = os.read(process.stdout.fileno(), 64)
            if not chunk:
                break
            line += chunk
        try:
            port = int(line.split(b"\n")[0])
        except ValueError:
            with open(log_path, "rb") as log:
                tail = log.read().decode(errors="replace")[-2000:]
            raise UnavailableError(
                StatusCode.UNAVAILABLE,
                f"veil-server party {party} did not print its port (exit status "
                f"{process.poll()}); its log:\n{tail}") from None
        self._ports.append(port)

    @property
    def addresses(self) -> Tuple[str, ...]:
        """The servers' "HOST:PORT": two for dpf2, one for a single-server protocol."""
        return tuple(f"127.0.0.1:{port}" for port in self._ports)

    @property
    def pids(self) -> Tuple[int, ...]:
        return tuple(process.pid for process in self._processes)

    def client(self, **options: Any) -> Client:
        """A client of the servers (trusting their certificate with ``tls=True``)."""
        return Client(self.addresses, tls_certs=self.tls_certs, protocol=self.protocol, **options)

    def kill(self, party: int) -> None:
        """SIGKILL one server: a server that dies without warning."""
        self._processes[party].kill()
        self._processes[party].wait()

    def stop(self) -> None:
        """SIGTERM both servers (SIGKILL after 10 s) and remove the temporary folder."""
        for process in self._processes:
            if process.poll() is None:
                process.send_signal(signal.SIGTERM)
        for process in self._processes:
            try:
                process.wait(timeout=10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            for pipe in (process.stdin, process.stdout):
                if pipe:
                    pipe.close()
        self._processes = []
        if self._tmp is not None:
            self._tmp.cleanup()
            self._tmp = None

    def __enter__(self) -> "LocalServers":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.stop()


def local_servers(table: str, **options: Any) -> LocalServers:
    """Starts :class:`LocalServers` for `table` (a context manager)."""
    return LocalServers(table, **options)

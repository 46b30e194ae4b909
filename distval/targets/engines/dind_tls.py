"""The certificates of node Engines (``distval nodes up``, distval/targets/engines/dind.py): one CA per node set, one client
certificate and key (what ``--tls-ca/--tls-cert/--tls-key`` or ``DOCKER_CERT_PATH`` name) and a server
certificate per node for its address, all made on this machine with the ``openssl`` command.

Made here rather than in the node: the CA's key never enters a node, and one CA signs every node's certificate,
so one set of client files reaches all of them. Every private key is written by this process through
``os.open`` with mode 0600 (never by openssl, whose file modes follow the umask), in a directory created 0700;
openssl only prints keys and certificates to its standard output.
"""

from __future__ import annotations

import io
import os
import secrets
import subprocess
import tarfile
from dataclasses import dataclass
from pathlib import Path

from distval.config.engine_hosts import TlsFiles
from distval.errors import BadInput, EngineError

DAYS = 7  # node sets are for tests and short experiments: the certificates expire with them
OPENSSL_TIMEOUT_S = 60.0
KEY_OPTIONS = ("-algorithm", "EC", "-pkeyopt", "ec_paramgen_curve:P-256")  # fast to make; Go and OpenSSL take it
NODE_TLS_DIR = "/etc/distval-tls"  # in the node; its dockerd waits for READY_FILE there before it starts
READY_FILE = "ready"


@dataclass(frozen=True)
class NodeCa:
    """A node set's CA and client files, in ``directory`` (DOCKER_CERT_PATH layout: ca.pem, cert.pem, key.pem)."""

    directory: Path

    @property
    def ca(self) -> Path:
        return self.directory / "ca.pem"

    @property
    def ca_key(self) -> Path:
        return self.directory / "ca-key.pem"

    @property
    def client(self) -> TlsFiles:
        return TlsFiles(str(self.ca), str(self.directory / "cert.pem"), str(self.directory / "key.pem"))


def private_directory(path: Path) -> Path:
    """``path`` made with mode 0700 (and its missing parents); an existing one must be a directory of ours that
    no one else can read or write, else it is refused (someone else's files would hold our keys)."""
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        os.mkdir(path, 0o700)
    except FileExistsError:
        info = os.lstat(path)
        if not os.path.isdir(path) or os.path.islink(path) or info.st_uid != os.getuid() or info.st_mode & 0o077:
            raise BadInput(f"nodes: {path} exists and is not a private directory of this user (mode 0700)") from None
    return path


def write_file(path: Path, data: bytes, mode: int) -> None:
    """A new file with ``mode`` from its creation (O_EXCL: never an existing file, O_NOFOLLOW: never a link's target)."""
    fd = os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW, mode)
    with os.fdopen(fd, "wb") as handle:
        handle.write(data)


def _openssl(*args: str, stdin: bytes | None = None) -> bytes:
    try:
        done = subprocess.run(["openssl", *args], input=stdin, capture_output=True, timeout=OPENSSL_TIMEOUT_S, check=False)
    except FileNotFoundError:
        raise BadInput("nodes: TLS node Engines need the openssl command (or --plain for nodes without TLS)") from None
    except subprocess.TimeoutExpired:
        raise EngineError(f"nodes: openssl {args[0]} did not finish within {OPENSSL_TIMEOUT_S:g} s") from None
    if done.returncode != 0:
        last = (done.stderr.decode(errors="replace").strip().splitlines() or ["(no message)"])[-1]
        raise EngineError(f"nodes: openssl {args[0]} exited {done.returncode}: {last}")
    return done.stdout


def new_key() -> bytes:
    return _openssl("genpkey", *KEY_OPTIONS)


def _signed(ca: NodeCa, key: Path, subject: str, extensions: str) -> bytes:
    """A certificate for ``key`` signed by the CA, with these X.509v3 extensions (openssl's config syntax)."""
    csr = _openssl("req", "-new", "-key", str(key), "-subj", subject)
    ext = ca.directory / f"ext-{secrets.token_hex(4)}.cnf"
    write_file(ext, extensions.encode(), 0o600)
    try:
        return _openssl(
            "x509", "-req", "-CA", str(ca.ca), "-CAkey", str(ca.ca_key), "-set_serial", str(secrets.randbits(63)),
            "-days", str(DAYS), "-extfile", str(ext), stdin=csr,
        )  # fmt: skip
    finally:
        ext.unlink()


def make_ca(directory: Path) -> NodeCa:
    """A CA and a client certificate in a new private ``directory``."""
    ca = NodeCa(private_directory(directory))
    write_file(ca.ca_key, new_key(), 0o600)
    certificate = _openssl(
        "req", "-x509", "-new", "-key", str(ca.ca_key), "-subj", "/CN=distval-node-ca", "-days", str(DAYS),
        "-addext", "basicConstraints=critical,CA:TRUE", "-addext", "keyUsage=critical,keyCertSign,cRLSign",
    )  # fmt: skip
    write_file(ca.ca, certificate, 0o644)
    client_key = Path(ca.client.key)
    write_file(client_key, new_key(), 0o600)
    client = _signed(ca, client_key, "/CN=distval-client", "extendedKeyUsage=clientAuth\n")
    write_file(Path(ca.client.cert), client, 0o644)
    return ca


def server_archive(ca: NodeCa, name: str, address: str) -> bytes:
    """What goes into node ``name`` (at ``address``) under NODE_TLS_DIR, as a tar for put_archive into /etc: the CA's
    certificate, the node's certificate and its key (0600), then READY_FILE, which starts its dockerd."""
    key_path = ca.directory / f"server-{secrets.token_hex(4)}-key.pem"
    key = new_key()
    write_file(key_path, key, 0o600)
    try:
        extensions = f"subjectAltName=IP:{address},DNS:{name},IP:127.0.0.1\nextendedKeyUsage=serverAuth\n"
        certificate = _signed(ca, key_path, f"/CN={name}", extensions)
    finally:
        key_path.unlink()  # it lives in the node only
    buffer = io.BytesIO()
    base = NODE_TLS_DIR.removeprefix("/etc/")
    with tarfile.open(fileobj=buffer, mode="w") as tar:
        directory = tarfile.TarInfo(base)
        directory.type, directory.mode = tarfile.DIRTYPE, 0o700
        tar.addfile(directory)
        for file_name, data, mode in (
            ("ca.pem", ca.ca.read_bytes(), 0o644),
            ("server.pem", certificate, 0o644),
            ("server-key.pem", key, 0o600),
            (READY_FILE, b"", 0o644),
        ):
            info = tarfile.TarInfo(f"{base}/{file_name}")
            info.size, info.mode = len(data), mode
            tar.addfile(info, io.BytesIO(data))
    return buffer.getvalue()

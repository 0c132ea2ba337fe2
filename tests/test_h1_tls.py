"""https:// servers: a self-signed server (the fault proxy speaking TLS in front of the simulator, its
certificate made here with `cryptography`) is measured with --ca-cert by both senders; without it the run is
exit 2 naming the certificate problem; --insecure is said loudly. The proxy variables are named, not used."""

from __future__ import annotations

import datetime
import ipaddress
import json
from pathlib import Path

import pytest
from cryptography import x509
from cryptography.hazmat.primitives import hashes, serialization
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import NameOID

from loadgen.client.tls import proxy_notice
from tests.conftest import run_loadgen, stop_process
from tests.test_h1_proxy_faults import start_proxy

pytestmark = pytest.mark.untimed  # its tests of other tiers than unit time nothing against the machine


def self_signed(folder: Path) -> tuple[Path, Path]:
    """A certificate for 127.0.0.1 signed by its own key (also its own CA); (cert.pem, key.pem)."""
    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(NameOID.COMMON_NAME, "loadgen test server")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (x509.CertificateBuilder().subject_name(name).issuer_name(name).public_key(key.public_key())
            .serial_number(x509.random_serial_number()).not_valid_before(now - datetime.timedelta(minutes=5))
            .not_valid_after(now + datetime.timedelta(days=1))
            .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
            .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
            .sign(key, hashes.SHA256()))
    cert_path, key_path = folder / "cert.pem", folder / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8,
                                           serialization.NoEncryption()))
    return cert_path, key_path


@pytest.fixture
def https_server(sim_factory, tmp_path):
    cert, key = self_signed(tmp_path)
    proc, url = start_proxy(sim_factory().url, "--tls-cert", str(cert), "--tls-key", str(key))
    assert url.startswith("https://")
    yield url, cert
    stop_process(proc)


def run(tmp_path: Path, url: str, *args: str):
    out = tmp_path / "tls.json"
    res = run_loadgen("--url", url, "--concurrency", "2", "--contexts", "60", "--max-tokens", "16",
                      "--requests-per-cell", "4", "--out", str(out), "--wait-ready", "0", *args, timeout=120)
    path = tmp_path / "tls.requests.jsonl"
    recs = [json.loads(line) for line in path.read_text().splitlines()] if path.exists() else []
    return res, [r for r in recs if r.get("phase") == "measure"]


@pytest.mark.sim
@pytest.mark.parametrize("client", ["h1", "aiohttp"])
def test_a_self_signed_server_is_measured_with_its_ca(https_server, tmp_path, client):
    url, cert = https_server
    res, recs = run(tmp_path, url, "--ca-cert", str(cert), "--http-client", client)
    assert res.returncode == 0, res.stderr[-1500:]
    assert [r["outcome"] for r in recs] == ["ok"] * 4


@pytest.mark.sim
def test_without_its_ca_the_run_is_exit_2_naming_the_certificate_problem(https_server, tmp_path):
    res, recs = run(tmp_path, https_server[0])
    assert res.returncode == 2 and not recs
    line = res.stderr.strip().splitlines()[-1]
    assert "TLS certificate not trusted (self-signed certificate); use --ca-cert FILE or --insecure" in line, line
    assert len(line) <= 120


@pytest.mark.sim
def test_insecure_is_said_loudly_and_measures(https_server, tmp_path):
    res, recs = run(tmp_path, https_server[0], "--insecure")
    assert res.returncode == 0, res.stderr[-1500:]
    assert "WARNING: --insecure: the server's TLS certificate is NOT checked" in res.stderr
    assert [r["outcome"] for r in recs] == ["ok"] * 4


@pytest.mark.unit
@pytest.mark.parametrize("args, says", [
    (["--url", "http://127.0.0.1:1", "--ca-cert", "x.pem"], "--ca-cert is for an https:// --url"),
    (["--url", "https://127.0.0.1:1", "--ca-cert", "/no/such.pem"], "--ca-cert /no/such.pem: no such file"),
    (["--url", "https://127.0.0.1:1", "--ca-cert", "x.pem", "--insecure"], "--ca-cert and --insecure"),
    (["--insecure"], "--insecure is for an https:// --url"),
])
def test_tls_flags_are_checked(cli, args, says):
    res = cli(*args)
    assert res.returncode == 2 and says in res.stderr, res.stderr


@pytest.mark.unit
@pytest.mark.parametrize("env, named", [
    ({}, None),
    ({"HTTPS_PROXY": "http://proxy:3128"}, "HTTPS_PROXY"),
    ({"https_proxy": "http://proxy:3128"}, "HTTPS_PROXY"),
    ({"HTTP_PROXY": "http://proxy:3128"}, None),  # another scheme's proxy
    ({"ALL_PROXY": "socks5://proxy:1080"}, "ALL_PROXY"),
    ({"HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": "127.0.0.1"}, None),
    ({"HTTPS_PROXY": "http://proxy:3128", "no_proxy": "*"}, None),
    ({"HTTPS_PROXY": "http://proxy:3128", "NO_PROXY": "example.com"}, "HTTPS_PROXY"),
])
def test_a_proxy_variable_that_applies_is_named_and_not_used(env, named):
    note = proxy_notice("https://127.0.0.1:8443", env)
    if named is None:
        assert note is None
    else:
        assert note.startswith(f"{named} is set, not used: loadgen connects to") and len(note) <= 120, note

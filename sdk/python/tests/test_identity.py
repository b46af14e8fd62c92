import json
import os
import stat

import pytest

import idn


def test_cli_record_loads_keeps_unknown_fields_and_saves_0700_0600(vectors, tmp_path):
    d = tmp_path / "identities" / "vector-alice"
    d.mkdir(parents=True)
    (d / "identity.json").write_text(json.dumps(vectors["identity_record"], indent=2))
    ident = idn.Identity.load(home=tmp_path)
    assert ident.namespace == "vector-alice"
    assert ident.key_id == vectors["identity_record"]["keyId"]
    assert ident.public_key == vectors["identity_record"]["publicKey"]
    assert ident.name is None

    from datetime import datetime, timezone
    ident.rename("Invoice bot", now=datetime(2024, 1, 1, tzinfo=timezone.utc))
    path = ident.save(home=tmp_path)
    assert stat.S_IMODE(os.stat(path).st_mode) == 0o600
    assert stat.S_IMODE(os.stat(d).st_mode) == 0o700
    saved = json.loads(path.read_text())
    assert saved["someFutureField"] == {"kept": True}
    assert saved["privateKey"] == vectors["identity_record"]["privateKey"]
    assert saved["certificate"]["name"] == "Invoice bot"
    assert saved["updatedAt"] == "2024-01-01T00:00:00Z"
    back = idn.Identity.load("vector-alice", home=tmp_path)
    assert back.name == "Invoice bot" and back.public_key == ident.public_key
    assert idn.Identity.list(home=tmp_path) == ["vector-alice"]
    assert [p.name for p in d.iterdir()] == ["identity.json"], "no temporary file left"


def test_create_save_load_through_idn_home(tmp_path, monkeypatch):
    monkeypatch.setenv("IDN_HOME", str(tmp_path))
    ident = idn.Identity.create("py-agent", name="Py agent")
    ident.save()
    back = idn.Identity.load("py-agent")
    assert back.certificate_header == ident.certificate_header
    assert back.name == "Py agent"


def test_refusals(vectors, tmp_path):
    with pytest.raises(FileNotFoundError, match="no identity 'nobody-here'"):
        idn.Identity.load("nobody-here", home=tmp_path)
    with pytest.raises(FileNotFoundError, match="no identity in"):
        idn.Identity.load(home=tmp_path)
    with pytest.raises(ValueError, match="invalid namespace"):
        idn.Identity.create("-bad-")
    rec = dict(vectors["identity_record"])
    rec["certificate"] = dict(rec["certificate"], issuedAt="2020-01-01T00:00:00Z")
    with pytest.raises(ValueError, match="proof does not verify"):
        idn.Identity.from_record(json.dumps(rec))
    other = idn.Identity.create("other-ns")
    rec = dict(vectors["identity_record"], publicKey=other.public_key)
    with pytest.raises(ValueError, match="does not match"):
        idn.Identity.from_record(json.dumps(rec))
    ident = idn.Identity.create("py-agent")
    with pytest.raises(ValueError, match="nonce"):
        ident.sign("GET", "http://x/", nonce="short")
    with pytest.raises(ValueError, match="subject"):
        ident.sign("GET", "http://x/", subject="a\nb")
    with pytest.raises(ValueError, match="http"):
        ident.sign("GET", "ftp://x/")


def test_identity_behind_an_external_signer():
    """A key object the SDK never sees stands for a keychain, token or KMS."""
    from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PrivateKey
    from cryptography.hazmat.primitives.serialization import Encoding, PublicFormat

    from idn.verify import MemoryNonceStore, verify_request

    hidden = Ed25519PrivateKey.generate()
    pub = hidden.public_key().public_bytes(Encoding.Raw, PublicFormat.Raw)
    calls = []

    def sign(data: bytes) -> bytes:
        calls.append(len(data))
        return hidden.sign(data)

    ident = idn.Identity.with_signer("kms-agent", pub, sign, name="KMS bot")
    assert ident.name == "KMS bot" and len(calls) == 1, "the certificate's proof"
    url = "https://gw.example/proxy/x"
    headers = ident.sign("POST", url, b"{}")
    agent = verify_request("POST", url, headers, b"{}", nonces=MemoryNonceStore())
    assert agent.fingerprint == ident.fingerprint
    with pytest.raises(ValueError, match="external signer"):
        ident.to_record()
    again = idn.Identity.with_signer("kms-agent", pub, sign, certificate=ident.certificate)
    assert again.certificate_header == ident.certificate_header, "a kept certificate is reused"
    with pytest.raises(ValueError, match="proof does not verify"):
        idn.Identity.with_signer("kms-agent", pub, Ed25519PrivateKey.generate().sign)
    with pytest.raises(ValueError, match="not for this namespace"):
        idn.Identity.with_signer("other-agent", pub, sign, certificate=ident.certificate)
    ident.rename("KMS bot 2")
    assert verify_request("GET", url, ident.sign("GET", url), nonces=MemoryNonceStore()).name == "KMS bot 2"

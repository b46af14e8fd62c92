"""``python -m idn init`` writes the identity ``idn init`` writes, and says
what comes next."""

import json
import os
import subprocess
import sys

import idn
from conftest import ROOT


def run(home, *args):
    env = {**os.environ, "IDN_HOME": str(home), "PYTHONPATH": str(ROOT / "src")}
    return subprocess.run([sys.executable, "-m", "idn", *args], env=env, capture_output=True, text=True)


def test_init_creates_renames_and_explains_the_namespace(tmp_path):
    made = run(tmp_path, "init", "cli-agent", "--name", "CLI bot")
    assert made.returncode == 0, made.stderr
    ident = idn.Identity.load("cli-agent", home=tmp_path)
    assert ident.name == "CLI bot"
    assert (tmp_path / "identities" / "cli-agent" / "identity.json").stat().st_mode & 0o777 == 0o600
    assert made.stdout.startswith("Created identity cli-agent\n")
    for want in (ident.fingerprint, ident.key_id, "quickstart-agent", "NAMESPACE_NOT_FOUND", "AUTH_CLAIM_REQUIRED"):
        assert want in made.stdout, want

    again = run(tmp_path, "init", "cli-agent")
    assert again.returncode == 1 and "already exists" in again.stderr and "--force" in again.stderr

    renamed = run(tmp_path, "init", "cli-agent", "--name", "Billing bot", "--json")
    assert renamed.returncode == 0, renamed.stderr
    shown = json.loads(renamed.stdout)
    assert shown["name"] == "Billing bot" and shown["publicKey"] == ident.public_key, "a rename keeps the key"

    assert run(tmp_path, "init", "cli-agent", "--force").returncode == 0
    assert idn.Identity.load("cli-agent", home=tmp_path).public_key != ident.public_key

    for args in (["init", "x"], ["init"], ["init", "ok-agent", "--name", " spaced "], ["whoami"]):
        assert run(tmp_path, *args).returncode == 2, args

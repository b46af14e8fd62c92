"""The package builds and installs into a fresh virtual environment, offline
(its one dependency, cryptography, comes from the system's packages), and
works there. The venv has no pip of its own (--without-pip skips
ensurepip, the slow part): the system's pip, visible through
--system-site-packages, installs into it."""

import importlib.util
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent


def _need(module):
    if importlib.util.find_spec(module) is None:
        msg = f"the install test needs {module} for {sys.executable} (Debian: python3-venv, python3-pip, python3-setuptools, python3-wheel)"
        if os.environ.get("CI") == "true":
            pytest.fail(msg)
        pytest.skip(msg)


def test_builds_and_installs_into_a_fresh_venv(tmp_path):
    for m in ("venv", "pip", "setuptools", "wheel"):
        _need(m)
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns("tests", "bench", "build", "*.egg-info", "__pycache__", ".pytest_cache"))
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_INDEX_URL")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    subprocess.run([str(py), "-m", "pip", "install", "--quiet", "--no-build-isolation", "--no-index", str(src)],
                   check=True, env=env, cwd=tmp_path)
    out = subprocess.run(
        [str(py), "-c",
         "import idn, json; from idn.httpx_auth import IdnAuth; from idn.requests_auth import IdnAuth as R;"
         "i = idn.Identity.create('venv-agent', name='Venv agent');"
         "h = i.sign('POST', 'https://gw.example/proxy/x', b'{}');"
         "print(json.dumps({'file': idn.__file__, 'ns': h['idn-namespace'], 'digest': 'content-digest' in h, 'name': i.name}))"],
        check=True, env=env, cwd=tmp_path, capture_output=True, text=True)
    import json
    home = tmp_path / "home"
    made = subprocess.run([str(py), "-m", "idn", "init", "venv-cli"], check=True, env={**env, "IDN_HOME": str(home)},
                          cwd=tmp_path, capture_output=True, text=True)
    assert made.stdout.startswith("Created identity venv-cli\n") and (home / "identities" / "venv-cli").is_dir()
    got = json.loads(out.stdout)
    assert got["file"].startswith(str(venv)), got["file"]
    assert (got["ns"], got["digest"], got["name"]) == ("venv-agent", True, "Venv agent")

"""The package builds its release artifacts, a wheel and an sdist, offline
(through setuptools' PEP 517 backend, with the system's packages); each
installs into a fresh virtual environment (its one dependency,
cryptography, comes from the system's packages) and works there. The
venvs have no pip of their own (--without-pip skips ensurepip, the slow
part): the system's pip, visible through --system-site-packages, installs
into them."""

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


def _artifacts(src, dist):
    """Builds the wheel and the sdist of the package in src into dist, as a
    release would, and returns their paths."""
    # The backend rewrites sys.argv as it runs, so the path is read first.
    code = ("import sys; from setuptools import build_meta as b; d = sys.argv[1];"
            "w = b.build_wheel(d); s = b.build_sdist(d); print('artifacts:', w, s)")
    out = subprocess.run([sys.executable, "-c", code, str(dist)], check=True, cwd=src, capture_output=True, text=True)
    line = [l for l in out.stdout.splitlines() if l.startswith("artifacts: ")][-1]
    wheel, sdist = line.split()[1:]
    return dist / wheel, dist / sdist


@pytest.mark.parametrize("artifact", ["wheel", "sdist"])
def test_builds_and_installs_into_a_fresh_venv(tmp_path, artifact):
    for m in ("venv", "pip", "setuptools", "wheel"):
        _need(m)
    src = tmp_path / "src"
    shutil.copytree(ROOT, src, ignore=shutil.ignore_patterns("tests", "bench", "build", "dist", "*.egg-info", "__pycache__", ".pytest_cache"))
    wheel, sdist = _artifacts(src, tmp_path / "dist")
    version = "0.2.0"
    assert wheel.name == f"idn-{version}-py3-none-any.whl", wheel.name
    assert sdist.name == f"idn-{version}.tar.gz", sdist.name
    target = wheel if artifact == "wheel" else sdist
    venv = tmp_path / "venv"
    subprocess.run([sys.executable, "-m", "venv", "--system-site-packages", "--without-pip", str(venv)], check=True)
    py = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "PIP_INDEX_URL")}
    env["PIP_DISABLE_PIP_VERSION_CHECK"] = "1"
    subprocess.run([str(py), "-m", "pip", "install", "--quiet", "--no-build-isolation", "--no-index", str(target)],
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

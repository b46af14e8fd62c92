import json
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
if "idn" not in sys.modules:
    sys.path.insert(0, str(ROOT / "src"))

VECTORS = ROOT.parent.parent / "identity" / "testdata" / "idn-profile-v1.json"


@pytest.fixture(scope="session")
def vectors():
    return json.loads(VECTORS.read_text("utf-8"))

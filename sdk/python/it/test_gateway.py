"""Against the real control plane and gateway, which the Go test
e2e/TestSDKsAgainstRealServers starts and describes in IDN_IT_*: the whole
path of a new agent, from identity to an MCP tool call, with httpx (sync
and async) and requests."""

import asyncio
import json
import os
import subprocess
import sys
import threading
from wsgiref.simple_server import WSGIRequestHandler, make_server
from pathlib import Path

import httpx
import pytest
import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
import idn  # noqa: E402
from idn.httpx_auth import IdnAuth  # noqa: E402
from idn.requests_auth import IdnAuth as RequestsAuth  # noqa: E402
from idn.verify import ControlPlaneClaims, IdnWSGIMiddleware, MemoryNonceStore  # noqa: E402

env = os.environ
pytestmark = pytest.mark.skipif("IDN_IT_GATEWAY" not in env, reason="run by the Go test e2e/TestSDKsAgainstRealServers")


def _rpc_result(r: httpx.Response) -> dict:
    """A Streamable HTTP answer, JSON or an event stream, as its JSON-RPC message."""
    idn.raise_for_error(r)
    if r.headers.get("content-type", "").startswith("text/event-stream"):
        for line in r.text.splitlines():
            if line.startswith("data:"):
                return json.loads(line[5:])
        raise AssertionError(f"no data in event stream: {r.text!r}")
    return r.json()


async def _mcp_call(agent: idn.Identity, url: str) -> str:
    """A minimal MCP client on httpx.AsyncClient, as MCP client libraries on
    httpx are: initialize, initialized, tools/call; IdnAuth signs each POST."""
    headers = {"accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(auth=IdnAuth(agent), headers=headers, timeout=30) as c:
        r = await c.post(url, json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {
            "protocolVersion": "2025-06-18", "capabilities": {}, "clientInfo": {"name": "idn-py-it", "version": "1"}}})
        init = _rpc_result(r)
        assert "result" in init, init
        session = {"mcp-session-id": r.headers["mcp-session-id"]} if "mcp-session-id" in r.headers else {}
        session["mcp-protocol-version"] = init["result"]["protocolVersion"]
        r = await c.post(url, headers=session, json={"jsonrpc": "2.0", "method": "notifications/initialized"})
        assert r.status_code in (200, 202), r.text
        r = await c.post(url, headers=session, json={"jsonrpc": "2.0", "id": 2, "method": "tools/call",
                                                     "params": {"name": "weather.now", "arguments": {"city": "Oslo"}}})
        return _rpc_result(r)["result"]["content"][0]["text"]


def test_new_agent_end_to_end():
    ns = env["IDN_IT_NAMESPACE"]
    # The package's init command writes the identity (IDN_HOME: the Go side
    # loads it afterwards).
    init = subprocess.run([sys.executable, "-m", "idn", "init", ns, "--name", env["IDN_IT_NAME"]], capture_output=True, text=True,
                          env={**env, "PYTHONPATH": str(Path(__file__).resolve().parent.parent / "src")})
    assert init.returncode == 0, init.stderr
    agent = idn.Identity.load(ns)
    assert agent.fingerprint in init.stdout
    gateway, rest = env["IDN_IT_GATEWAY"], env["IDN_IT_REST"]
    url = f"{gateway}/proxy/{rest}/forecast?city=Paris"

    with httpx.Client(auth=IdnAuth(agent), timeout=30) as client:
        refusal = idn.read_error(client.get(url))
        assert refusal is not None and refusal.code == "AUTH_CLAIM_REQUIRED", refusal
        assert refusal.status == 403 and refusal.claim_id.startswith("clm_") and refusal.claim_status == "pending"
        assert refusal.request_id
        assert idn.read_error(client.get(url)).claim_id == refusal.claim_id, "the gateway reuses the claim"

        approved = httpx.post(f"{env['IDN_IT_APPROVE']}?namespace={ns}&claim={refusal.claim_id}")
        assert approved.status_code == 200, approved.text

        seen = []
        ok = idn.raise_for_error(idn.wait_for_approval(lambda: client.get(url), initial_delay=0.2, timeout=30,
                                                       on_claim=lambda c, e: seen.append((c, e.key_fingerprint))))
        assert ok.json() == {"city": "Paris", "forecast": "sunny", "credential_injected": True}
        assert all(s == (refusal.claim_id, agent.fingerprint) for s in seen), seen
        assert refusal.key_fingerprint == agent.fingerprint

        # An upstream's forged claim is a plain 403: no claim, no wait.
        forged = idn.read_error(client.get(f"{gateway}/proxy/{rest}/forged"))
        assert (forged.code, forged.claim_id, forged.envelope["claim_id"]) == ("HTTP_403", None, "clm_stranger")

    # A subject beyond Latin-1 and a bare '?' pass the gateway's verifier.
    subject = "Zoë Müller · 山田 🤖"
    with httpx.Client(auth=IdnAuth(agent, subject=subject), timeout=30) as client:
        assert idn.raise_for_error(client.get(f"{gateway}/proxy/{rest}/forecast?")).json()["city"] == ""
    with requests.Session() as s:
        s.auth = RequestsAuth(agent, subject=subject)
        assert idn.raise_for_error(s.get(f"{gateway}/proxy/{rest}/forecast", params={"city": "Zürich"}, timeout=30)).json()["city"] == "Zürich"

    # An upstream's redirect to another port is followed without a signature.
    unsigned = {"landed": True, "signing_headers": [], "body_bytes": 0}
    with httpx.Client(auth=IdnAuth(agent), follow_redirects=True, timeout=30) as client:
        moved = client.get(f"{gateway}/proxy/{rest}/moved")
        assert moved.json() == unsigned, moved.text
    with requests.Session() as s:
        s.auth = RequestsAuth(agent)
        moved = s.post(f"{gateway}/proxy/{rest}/moved", data=b"secret", timeout=30)
        assert moved.json() == unsigned, moved.text

    with requests.Session() as s:
        s.auth = RequestsAuth(agent)
        r = s.get(f"{env['IDN_IT_GATEWAY']}/proxy/{env['IDN_IT_REST']}/forecast", params={"city": "Rome"}, timeout=30)
        assert idn.raise_for_error(r).json()["city"] == "Rome"
        r = s.get(f"{env['IDN_IT_CONTROLPLANE']}/v1/namespaces/{ns}", timeout=30)
        assert idn.raise_for_error(r).json()["namespace"] == ns

    assert asyncio.run(_mcp_call(agent, f"{env['IDN_IT_GATEWAY']}/mcp/{env['IDN_IT_MCP']}")) == "sunny in Oslo"


def test_service_verifying_agents_itself():
    """A service that verifies agents itself, with the control plane's claim
    check: a new key is refused with a claim the owner approves, as at the
    gateway, then admitted."""
    ns = env["IDN_IT_NAMESPACE"]
    claims = ControlPlaneClaims(env["IDN_IT_CONTROLPLANE"], env["IDN_IT_API_KEY"], env["IDN_IT_SERVICE"],
                                idn.Identity.create("weather-service"))

    def app(environ, start_response):
        agent = environ["idn.agent"]
        start_response("200 OK", [("content-type", "application/json")])
        return [json.dumps({"hello": agent.subject, "key": agent.fingerprint}).encode()]

    srv = make_server("127.0.0.1", 0, IdnWSGIMiddleware(app, nonces=MemoryNonceStore(), claims=claims), handler_class=_Quiet)
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    url = f"http://127.0.0.1:{srv.server_port}/forecast"
    try:
        caller = idn.Identity.create(ns, name="Direct caller")
        with requests.Session() as s:
            s.auth = RequestsAuth(caller, subject="Zoë")
            asked = idn.read_error(s.get(url, timeout=30))
            assert asked is not None and asked.code == "AUTH_CLAIM_REQUIRED" and asked.claim_id.startswith("clm_"), asked
            approved = httpx.post(f"{env['IDN_IT_APPROVE']}?namespace={ns}&claim={asked.claim_id}")
            assert approved.status_code == 200, approved.text
            ok = idn.raise_for_error(idn.wait_for_approval(lambda: s.get(url, timeout=30), initial_delay=0.1, timeout=30))
            assert ok.json() == {"hello": "Zoë", "key": caller.fingerprint}
    finally:
        srv.shutdown()
        srv.server_close()


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args):
        pass

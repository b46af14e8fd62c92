"""Against the real control plane and gateway, which the Go test
e2e/TestSDKsAgainstRealServers starts and describes in IDN_IT_*: the whole
path of a new agent, from identity to an MCP tool call, with httpx (sync
and async) and requests."""

import asyncio
import json
import os
import sys
from pathlib import Path

import httpx
import pytest
import requests

sys.path.insert(0, str(Path(__file__).resolve().parent.parent / "src"))
import idn  # noqa: E402
from idn.httpx_auth import IdnAuth  # noqa: E402
from idn.requests_auth import IdnAuth as RequestsAuth  # noqa: E402

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
    agent = idn.Identity.create(ns, name=env["IDN_IT_NAME"])
    agent.save()  # IDN_HOME: the Go side loads it afterwards
    url = f"{env['IDN_IT_GATEWAY']}/proxy/{env['IDN_IT_REST']}/forecast?city=Paris"

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
                                                       on_claim=lambda c, e: seen.append(c)))
        assert ok.json() == {"city": "Paris", "forecast": "sunny", "credential_injected": True}
        assert all(c == refusal.claim_id for c in seen), seen

    with requests.Session() as s:
        s.auth = RequestsAuth(agent)
        r = s.get(f"{env['IDN_IT_GATEWAY']}/proxy/{env['IDN_IT_REST']}/forecast", params={"city": "Rome"}, timeout=30)
        assert idn.raise_for_error(r).json()["city"] == "Rome"
        r = s.get(f"{env['IDN_IT_CONTROLPLANE']}/v1/namespaces/{ns}", timeout=30)
        assert idn.raise_for_error(r).json()["namespace"] == ns

    assert asyncio.run(_mcp_call(agent, f"{env['IDN_IT_GATEWAY']}/mcp/{env['IDN_IT_MCP']}")) == "sunny in Oslo"

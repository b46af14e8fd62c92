"""The client integrations against a real loopback server that verifies
every signature: httpx (sync and async), requests, and the waits."""

import asyncio
import json

import httpx
import pytest
import requests

import idn
from idn.httpx_auth import IdnAuth as HttpxAuth
from idn.requests_auth import IdnAuth as RequestsAuth
from verifier import Recorder


@pytest.fixture
def agent():
    return idn.Identity.create("client-agent", name="Client agent")


@pytest.fixture
def server():
    s = Recorder()
    yield s
    s.close()


def test_httpx_sync_signs_each_request(agent, server):
    with httpx.Client(auth=HttpxAuth(agent, subject="user-7")) as c:
        r = c.post(server.origin + "/proxy/c/items?q=a%2Fb", json={"a": 1}, headers={"signature": "stale"})
        assert r.json() == {"verdict": "ok"}
        c.get(server.origin + "/proxy/c/items")
    post, get = server.seen
    assert post["verdict"] == "ok" and get["verdict"] == "ok"
    assert post["headers"]["idn-subject"] == "user-7"
    assert post["path"] == "/proxy/c/items?q=a%2Fb"
    assert "content-digest" in post["headers"] and "content-digest" not in get["headers"]
    assert post["headers"]["signature-input"] != get["headers"]["signature-input"]


def test_httpx_async_signs_each_request(agent, server):
    async def run():
        async with httpx.AsyncClient(auth=HttpxAuth(agent)) as c:
            rs = await asyncio.gather(*(c.put(server.origin + f"/r/{i}", content=b"x" * i) for i in range(1, 4)))
            return [r.json()["verdict"] for r in rs]

    assert asyncio.run(run()) == ["ok", "ok", "ok"]


def test_requests_signs_each_request(agent, server):
    with requests.Session() as s:
        s.auth = RequestsAuth(agent)
        assert s.post(server.origin + "/p", data="text body, café").json() == {"verdict": "ok"}
        assert s.get(server.origin + "/g", params={"a": "b c"}).json() == {"verdict": "ok"}
        with pytest.raises(ValueError, match="streamed"):
            s.post(server.origin + "/p", data=(b"x" for _ in range(2)))
    assert [x["verdict"] for x in server.seen] == ["ok", "ok"]
    assert server.seen[0]["body"] == "text body, café".encode()


def envelope(code, **extra):
    return {"error": "refused", "code": code, "request_id": "req_1", "timestamp": "2026-01-01T00:00:00Z", **extra}


def test_read_error_and_raise_for_error():
    r = httpx.Response(403, json=envelope("AUTH_CLAIM_REQUIRED", claim_id="clm_1", claim_status="pending"), headers={"retry-after": "3"})
    e = idn.read_error(r)
    assert (e.code, e.status, e.request_id, e.claim_id, e.claim_status, e.retry_after) == ("AUTH_CLAIM_REQUIRED", 403, "req_1", "clm_1", "pending", 3)
    assert e.claim_required
    assert idn.read_error(httpx.Response(200, text="fine")) is None
    plain = idn.read_error(httpx.Response(502, text="<html>", headers={"x-request-id": "req_2"}))
    assert (plain.code, plain.request_id, plain.envelope) == ("HTTP_502", "req_2", None)
    with pytest.raises(idn.IdnError) as info:
        idn.raise_for_error(httpx.Response(404, json=envelope("CONNECTION_NOT_FOUND")))
    assert info.value.code == "CONNECTION_NOT_FOUND"


def claim_then_ok(n):
    if n <= 2:
        return 403, {}, envelope("AUTH_CLAIM_REQUIRED", claim_id="clm_9", claim_status="pending")
    if n == 3:
        return 503, {"retry-after": "0"}, envelope("AUTH_CLAIMS_UNAVAILABLE")
    return 200, {}, {"done": True}


def test_wait_for_approval_reuses_the_claim_until_approved(agent):
    s = Recorder(claim_then_ok)
    try:
        claims = []
        with requests.Session() as session:
            session.auth = RequestsAuth(agent)
            r = idn.wait_for_approval(lambda: session.get(s.origin + "/proxy/x"), initial_delay=0.01, on_claim=lambda c, e: claims.append(c))
        assert r.json() == {"done": True}
        assert claims == ["clm_9"]
        assert [x["verdict"] for x in s.seen] == ["ok"] * 4
        assert len({x["headers"]["signature-input"] for x in s.seen}) == 4, "each try is signed afresh"
    finally:
        s.close()


def test_wait_for_approval_async_and_deadline(agent):
    s = Recorder(claim_then_ok)
    try:
        async def run():
            async with httpx.AsyncClient(auth=HttpxAuth(agent)) as c:
                return await idn.wait_for_approval_async(lambda: c.get(s.origin + "/x"), initial_delay=0.01)

        assert asyncio.run(run()).json() == {"done": True}
    finally:
        s.close()
    always = Recorder(lambda n: (403, {}, envelope("AUTH_CLAIM_REQUIRED", claim_id="clm_8")))
    try:
        with httpx.Client(auth=HttpxAuth(agent)) as c:
            with pytest.raises(idn.IdnError) as info:
                idn.wait_for_approval(lambda: c.get(always.origin + "/x"), timeout=0.05, initial_delay=0.02)
        assert info.value.claim_id == "clm_8"
    finally:
        always.close()
    other = Recorder(lambda n: (403, {}, envelope("CONNECTION_DISABLED")))
    try:
        with httpx.Client() as c:
            r = idn.wait_for_approval(lambda: c.get(other.origin + "/x"))
        assert idn.read_error(r).code == "CONNECTION_DISABLED" and len(other.seen) == 1
    finally:
        other.close()


def test_mcp_over_httpx_is_signed(agent, server):
    """An MCP client built on httpx sends JSON-RPC POSTs; each is signed."""
    with httpx.Client(auth=HttpxAuth(agent), headers={"accept": "application/json, text/event-stream"}) as c:
        c.post(server.origin + "/mcp/tools", json={"jsonrpc": "2.0", "id": 1, "method": "initialize", "params": {}})
        c.post(server.origin + "/mcp/tools", json={"jsonrpc": "2.0", "method": "notifications/initialized"})
    assert [x["verdict"] for x in server.seen] == ["ok", "ok"]
    assert json.loads(server.seen[0]["body"])["method"] == "initialize"


SUBJECT = "Zoë Müller · 山田 🤖"
SUBJECT_HEADER = '%"Zo%c3%ab M%c3%bcller %c2%b7 %e5%b1%b1%e7%94%b0 %f0%9f%a4%96"'


def test_non_ascii_subject_and_bare_query_sent_as_signed(agent, server):
    """Before: requests sent 'ë' as Latin-1 and httpx refused it; the
    subject now travels as a display string, and the URL (a bare '?'
    included) is signed as each client sends it."""
    with httpx.Client(auth=HttpxAuth(agent, subject=f" {SUBJECT} ")) as c:
        c.get(server.origin + "/proxy/c/items?")
    with requests.Session() as s:
        s.auth = RequestsAuth(agent, subject=SUBJECT)
        s.get(server.origin + "/proxy/c/items?")
    for got in server.seen:
        assert got["verdict"] == "ok", got
        assert got["headers"]["idn-subject"] == SUBJECT_HEADER
        assert idn.decode_subject(got["headers"]["idn-subject"]) == SUBJECT
    assert [x["path"] for x in server.seen] == ["/proxy/c/items?", "/proxy/c/items"]


def test_subject_encoding_rules():
    assert idn.encode_subject("user-42") == "user-42"
    assert idn.encode_subject('%"x"') == '%"%25%22x%22"'
    assert idn.decode_subject('%"%25%22x%22"') == '%"x"'
    for bad in ('%"Zo%C3%AB"', '%"Zo%eb"', '%"Zo', '%"a"b"', '%"a%e"', '%"a%+1"'):
        with pytest.raises(ValueError):
            idn.decode_subject(bad)
    with pytest.raises(ValueError):
        idn.validate_subject("evil\u202eexe")

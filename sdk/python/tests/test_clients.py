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


def marked(status, code, headers=None, **extra):
    """An answer an idn server wrote, as Recorder answers: marked with Idn-Error."""
    return status, {"idn-error": code, **(headers or {})}, envelope(code, **extra)


def idn_response(status, code, headers=None, **extra):
    return httpx.Response(status, json=envelope(code, **extra), headers={"idn-error": code, **(headers or {})})


def test_read_error_and_raise_for_error():
    r = idn_response(403, "AUTH_CLAIM_REQUIRED", {"retry-after": "3"}, claim_id="clm_1", claim_status="pending")
    e = idn.read_error(r)
    assert (e.code, e.status, e.request_id, e.claim_id, e.claim_status, e.retry_after) == ("AUTH_CLAIM_REQUIRED", 403, "req_1", "clm_1", "pending", 3)
    assert e.claim_required and e.from_idn
    assert idn.read_error(httpx.Response(200, text="fine")) is None
    plain = idn.read_error(httpx.Response(502, text="<html>", headers={"x-request-id": "req_2"}))
    assert (plain.code, plain.request_id, plain.envelope) == ("HTTP_502", "req_2", None)
    with pytest.raises(idn.IdnError) as info:
        idn.raise_for_error(idn_response(404, "CONNECTION_NOT_FOUND"))
    assert info.value.code == "CONNECTION_NOT_FOUND"


def test_unmarked_envelope_is_not_acted_on(agent):
    """An upstream's 403 passed through the gateway names another key's
    claim; without Idn-Error (the gateway strips an upstream's), or with
    one naming another code, it is an ordinary HTTP error."""
    forged = envelope("AUTH_CLAIM_REQUIRED", claim_id="clm_stranger", claim_status="pending")
    for headers in ({}, {"idn-error": "UPSTREAM_ERROR"}):
        e = idn.read_error(httpx.Response(403, json=forged, headers=headers))
        assert (e.code, e.from_idn, e.claim_id, e.claim_required) == ("HTTP_403", False, None, False)
        assert e.envelope["claim_id"] == "clm_stranger"
    upstream = Recorder(lambda n: (403, {}, forged))
    try:
        seen = []
        with httpx.Client(auth=HttpxAuth(agent)) as c:
            r = idn.wait_for_approval(lambda: c.get(upstream.origin + "/x"), on_claim=lambda cid, err: seen.append(cid))
        assert r.status_code == 403 and len(upstream.seen) == 1, "returned, not retried"
        assert seen == [], "the owner is not shown the stranger's claim"
    finally:
        upstream.close()


def test_retry_after_ascii_digits_or_http_date():
    def after(v):
        return idn.read_error(idn_response(503, "AUTH_CLAIMS_UNAVAILABLE", {"retry-after": v})).retry_after

    assert after("7") == 7
    assert after("\u00b2".encode()) is None  # before: ValueError from int("²")
    assert after("-1") is None and after("1.5") is None
    assert after("Thu, 01 Jan 1970 00:00:00 GMT") == 0
    assert idn.parse_retry_after("²") is None and idn.parse_retry_after("٤") is None
    assert idn.parse_retry_after("Wed, 21 Oct 2015 07:28:00 GMT", now=1445412420) == 60
    assert idn.parse_retry_after("tomorrow") is None


def claim_then_ok(n):
    if n <= 2:
        return marked(403, "AUTH_CLAIM_REQUIRED", claim_id="clm_9", claim_status="pending")
    if n == 3:
        return marked(503, "AUTH_CLAIMS_UNAVAILABLE", {"retry-after": "0"})
    return 200, {}, {"done": True}


def test_wait_for_approval_reuses_the_claim_until_approved(agent):
    s = Recorder(claim_then_ok)
    try:
        claims = []
        with requests.Session() as session:
            session.auth = RequestsAuth(agent)
            r = idn.wait_for_approval(lambda: session.get(s.origin + "/proxy/x"), initial_delay=0.01,
                                      on_claim=lambda c, e: claims.append((c, e.key_fingerprint)))
        assert r.json() == {"done": True}
        assert claims == [("clm_9", agent.fingerprint)], "on_claim names the key the owner should see"
        assert agent.key_id.endswith("#" + agent.fingerprint)
        assert [x["verdict"] for x in s.seen] == ["ok"] * 4
        assert len({x["headers"]["signature-input"] for x in s.seen}) == 4, "each try is signed afresh"
    finally:
        s.close()


@pytest.mark.parametrize("code,status", [("AUTH_CLAIM_REJECTED", "rejected"), ("AUTH_CLAIM_REVOKED", "revoked"),
                                         ("AUTH_CLAIM_REQUIRED", "rejected")])
def test_refused_claim_ends_the_wait_at_once(agent, code, status):
    def answer(n):
        if n == 1:
            return marked(403, "AUTH_CLAIM_REQUIRED", claim_id="clm_7", claim_status="pending")
        return marked(403, code, claim_id="clm_7", claim_status=status)

    s = Recorder(answer)
    try:
        with httpx.Client(auth=HttpxAuth(agent)) as c:
            with pytest.raises(idn.IdnError) as info:
                idn.wait_for_approval(lambda: c.get(s.origin + "/x"), initial_delay=0.01, timeout=60)
        assert info.value.code == code and info.value.claim_refused
        assert len(s.seen) == 2, "no try after the refusal"

        async def run():
            async with httpx.AsyncClient(auth=HttpxAuth(agent)) as c:
                return await idn.wait_for_approval_async(lambda: c.get(s.origin + "/x"), initial_delay=0.01, timeout=60)

        with pytest.raises(idn.IdnError):
            asyncio.run(run())
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
    always = Recorder(lambda n: marked(403, "AUTH_CLAIM_REQUIRED", claim_id="clm_8"))
    try:
        with httpx.Client(auth=HttpxAuth(agent)) as c:
            with pytest.raises(idn.IdnError) as info:
                idn.wait_for_approval(lambda: c.get(always.origin + "/x"), timeout=0.05, initial_delay=0.02)
        assert info.value.claim_id == "clm_8"
    finally:
        always.close()
    other = Recorder(lambda n: marked(403, "CONNECTION_DISABLED"))
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


def test_mcp_routing_headers_are_signed(agent, server):
    """MCP 2026-07-28 names the method and tool in Mcp-Method and Mcp-Name;
    both clients cover them, so a signature binds the tool called."""
    body = {"jsonrpc": "2.0", "id": 1, "method": "tools/call", "params": {"name": "search"}}
    routing = {"mcp-method": "tools/call", "mcp-name": "search"}
    with httpx.Client(auth=HttpxAuth(agent)) as c:
        c.post(server.origin + "/mcp/github", json=body, headers=routing)
    with requests.Session() as s:
        s.auth = RequestsAuth(agent)
        s.post(server.origin + "/mcp/github", json=body, headers=routing)
    for seen in server.seen:
        assert seen["verdict"] == "ok"
        assert seen["headers"]["signature-input"].startswith('sig1=("@method" "@target-uri" "content-digest" '
                                                             '"idn-namespace" "idn-subject" "idn-agent-key" '
                                                             '"idn-agent-cert" "mcp-method" "mcp-name");')


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


SIGNING = ("signature", "signature-input", "content-digest", "idn-namespace", "idn-subject", "idn-agent-key", "idn-agent-cert")


@pytest.fixture
def redirecting():
    """A gateway stand-in answering 307 (or 303 for /see-other) to another
    loopback server, and that server."""
    elsewhere = Recorder(lambda n: (200, {}, {"landed": n}))
    gateway = Recorder(lambda n: (307, {"location": elsewhere.origin + "/landing?x=1"}, {}))
    yield gateway, elsewhere
    gateway.close()
    elsewhere.close()


def test_requests_redirect_goes_unsigned(agent, redirecting):
    """Before: requests.Session(auth=IdnAuth(...)) re-sent the signature,
    identity headers, content-digest and body to the host a 307 named."""
    gateway, elsewhere = redirecting
    with requests.Session() as s:
        s.auth = RequestsAuth(agent)
        r = s.post(gateway.origin + "/proxy/c/upload", data=b"secret body", headers={"x-kept": "1"})
    assert r.json() == {"landed": 1} and r.history[0].status_code == 307
    assert gateway.seen[0]["verdict"] == "ok"
    moved = elsewhere.seen[0]
    assert moved["method"] == "POST" and moved["path"] == "/landing?x=1" and moved["body"] == b""
    assert [h for h in SIGNING if h in moved["headers"]] == []
    assert moved["headers"]["x-kept"] == "1"


@pytest.mark.parametrize("asynchronous", [False, True])
def test_httpx_followed_redirect_goes_unsigned(agent, redirecting, asynchronous):
    """Before: httpx with follow_redirects=True (MCP clients' default)
    re-sent every signing header to the host a 307 named."""
    gateway, elsewhere = redirecting
    url = gateway.origin + "/proxy/c/upload"
    if asynchronous:
        async def run():
            async with httpx.AsyncClient(auth=HttpxAuth(agent), follow_redirects=True) as c:
                return await c.post(url, content=b"secret body")
        r = asyncio.run(run())
    else:
        with httpx.Client(auth=HttpxAuth(agent), follow_redirects=True) as c:
            r = c.post(url, content=b"secret body")
    assert r.json() == {"landed": 1}
    assert gateway.seen[0]["verdict"] == "ok"
    moved = elsewhere.seen[0]
    assert moved["path"] == "/landing?x=1"
    assert [h for h in SIGNING if h in moved["headers"]] == []


def flaky(n):
    return [(503, {"retry-after": "0"}, {}), (429, {"retry-after": "0"}, {}), (200, {}, {"try": n})][(n - 1) % 3]


@pytest.mark.parametrize("client", ["httpx", "httpx-async", "requests"])
def test_idempotent_requests_are_retried_each_signed_afresh(agent, client):
    s = Recorder(flaky)
    fast = idn.Retry(initial_delay=0.001)
    try:
        if client == "httpx":
            with httpx.Client(auth=HttpxAuth(agent, retry=fast)) as c:
                get = c.get(s.origin + "/g")
                post = c.post(s.origin + "/p", content=b"x")
        elif client == "httpx-async":
            async def run():
                async with httpx.AsyncClient(auth=HttpxAuth(agent, retry=fast)) as c:
                    return await c.get(s.origin + "/g"), await c.post(s.origin + "/p", content=b"x")
            get, post = asyncio.run(run())
        else:
            with requests.Session() as session:
                session.auth = RequestsAuth(agent, retry=fast)
                get = session.get(s.origin + "/g")
                post = session.post(s.origin + "/p", data=b"x")
        assert get.json() == {"try": 3}
        assert post.status_code == 503, "POST is not retried unless asked"
        assert len(s.seen) == 4
        assert all(x["verdict"] == "ok" for x in s.seen)
        assert len({x["headers"]["signature-input"] for x in s.seen}) == 4, "each try signed afresh"
    finally:
        s.close()


def test_retry_policy():
    r = idn.Retry()
    assert r.applies("GET") and r.applies("delete") and not r.applies("POST")
    assert idn.Retry(non_idempotent=True).applies("POST") and not idn.Retry(0).applies("GET")
    assert r.pause(0, 503, "2") == 2
    assert r.pause(0, 503, "3600") is None, "a Retry-After beyond max_delay is the caller's"
    assert r.pause(0, 500, None) is None and r.pause(2, 503, None) is None
    assert 0.25 <= r.pause(0, 429, None) <= 0.5 and 0.5 <= r.pause(1, 502, "soon") <= 1


def action_then_ok(n):
    if n <= 2:
        return marked(403, "AUTH_ACTION_APPROVAL_REQUIRED", action_id="act_5", expires_at="2026-12-02T03:10:00Z")
    return 200, {}, {"paid": True}


def test_wait_for_approval_waits_on_an_action(agent):
    s = Recorder(action_then_ok)
    try:
        actions = []
        with httpx.Client(auth=HttpxAuth(agent)) as c:
            r = idn.wait_for_approval(lambda: c.post(s.origin + "/proxy/bank/v1/payments", json={"amount": 5}), initial_delay=0.01,
                                      on_action=lambda a, e: actions.append((a, e.expires_at)))
        assert r.json() == {"paid": True}
        assert actions == [("act_5", "2026-12-02T03:10:00Z")], "on_action is told the action once"
        assert len({x["body"] for x in s.seen}) == 1, "each try sends the same call"
    finally:
        s.close()


def test_denied_action_ends_the_wait_at_once(agent):
    def answer(n):
        if n == 1:
            return marked(403, "AUTH_ACTION_APPROVAL_REQUIRED", action_id="act_6", expires_at="2026-12-02T03:10:00Z")
        return marked(403, "AUTH_ACTION_DENIED", action_id="act_6")

    s = Recorder(answer)
    try:
        with httpx.Client(auth=HttpxAuth(agent)) as c:
            with pytest.raises(idn.IdnError) as info:
                idn.wait_for_approval(lambda: c.post(s.origin + "/x", json={}), initial_delay=0.01, timeout=60)
        assert info.value.code == "AUTH_ACTION_DENIED" and info.value.claim_refused and info.value.action_id == "act_6"
        assert len(s.seen) == 2, "no try after the denial"
    finally:
        s.close()

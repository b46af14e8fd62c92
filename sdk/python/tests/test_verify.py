"""verify_request accepts what the gateway accepts and refuses what it
refuses, with the gateway's codes: the shared vectors and their negative
cases, attack rows, and the WSGI and ASGI middleware."""

import asyncio
import base64
import json
import threading
from wsgiref.simple_server import WSGIRequestHandler, make_server

import pytest
import requests

import idn
from idn.requests_auth import IdnAuth
from idn.verify import IdnASGIMiddleware, IdnWSGIMiddleware, MemoryNonceStore, VerifyError, verify_request


def received(vec, change=None):
    change = change or {}
    headers = {**vec.get("request_headers", {}), **vec["headers"]}
    if "header" in change:
        headers[change["header"][0]] = change["header"][1]
    return change.get("method", vec["method"]), change.get("url", vec["url"]), headers, change.get("body", vec["body"])


def store(at):
    return MemoryNonceStore(clock=lambda: at)  # the verifier's clock


def test_vectors_verify_with_the_subject_decoded(vectors):
    for vec in vectors["vectors"]:
        agent = verify_request(*received(vec), nonces=store(vec["created"]), now=vec["created"])
        assert (agent.namespace, agent.subject, agent.nonce) == ("vector-alice", vec["subject"], vec["nonce"]), vec["name"]
        assert agent.name == vec.get("agent_name") and agent.key_id == vectors["identity_record"]["keyId"]


def test_negative_cases_are_refused_with_the_gateways_code(vectors):
    for neg in vectors["negative"]:
        src = next(v for v in vectors["vectors"] if v["name"] == neg["source"])
        now = neg["change"].get("now", src["created"])
        with pytest.raises(VerifyError) as info:
            verify_request(*received(src, neg["change"]), nonces=store(now), now=now)
        assert info.value.code in neg["expect"], (neg["name"], info.value)


def test_attacks_are_refused(vectors):
    base = next(v for v in vectors["vectors"] if v["name"] == "get-no-body")
    post = next(v for v in vectors["vectors"] if v["name"] == "post-with-body")
    t = base["created"]
    nonces = store(t)
    inp = base["headers"]["signature-input"]

    def ok(method, url, headers, body, n=nonces):
        return verify_request(method, url, headers, body, nonces=n, now=t)

    def without(name):
        m, u, h, b = received(base)
        del h[name]
        return m, u, h, b

    def pairs(extra):
        m, u, h, b = received(base)
        return m, u, list(h.items()) + extra, b

    other_key = "ed25519:" + base64.b64encode(bytes([7] * 32)).decode()
    rows = [
        ("second signature", lambda: ok(*received(base, {"header": ["signature-input", inp + ', sig2=("@method");created=1700000000']})), "AUTH_HEADERS_INVALID"),
        ("signature without its input", lambda: ok(*without("signature-input")), "AUTH_HEADERS_INVALID"),
        ("missing identity header", lambda: ok(*without("idn-agent-key")), "AUTH_IDENTITY_INVALID"),
        ("duplicate namespace header", lambda: ok(*pairs([("Idn-Namespace", "vector-alice")])), "AUTH_HEADERS_INVALID"),
        ("body under a no-body signature", lambda: ok(*received(base, {"body": "smuggled"})), "AUTH_SIGNED_COMPONENTS_INVALID"),
        ("body-less request under a body signature", lambda: ok(*received(post, {"body": ""})), "AUTH_SIGNED_COMPONENTS_INVALID"),
        ("uncovered identity header", lambda: ok(*received(base, {"header": ["signature-input", inp.replace(' "idn-agent-cert"', "")]})), "AUTH_SIGNED_COMPONENTS_INVALID"),
        ("other algorithm", lambda: ok(*received(base, {"header": ["signature-input", inp.replace('alg="ed25519"', 'alg="hmac-sha256"')]})), "AUTH_SIGNATURE_INVALID"),
        ("key of another agent", lambda: ok(*received(base, {"header": ["idn-agent-key", other_key]})), "AUTH_IDENTITY_INVALID"),
        ("short nonce", lambda: ok(*received(base, {"header": ["signature-input", inp.replace('nonce="123e4567-e89b-12d3-a456-426614174000"', 'nonce="short"')]})), "AUTH_NONCE_INVALID"),
        ("expired by its own expires", lambda: ok(*received(base, {"header": ["signature-input", inp + ";expires=1699999999"]})), "AUTH_SIGNATURE_INVALID"),
        ("garbage signature-input", lambda: ok(*received(base, {"header": ["signature-input", 'sig1=("@method"']})), "AUTH_HEADERS_INVALID"),
        ("no nonce store", lambda: verify_request(*received(base), nonces=None, now=t), "AUTH_NONCE_INVALID"),
    ]
    for name, run, code in rows:
        with pytest.raises(VerifyError) as info:
            run()
        assert info.value.code == code, (name, info.value)
    ok(*received(base))
    with pytest.raises(VerifyError) as info:
        ok(*received(base))
    assert info.value.code == "AUTH_REPLAY_DETECTED"


def test_memory_nonce_store_forgets_only_after_the_time_and_refuses_when_full():
    now = [1000.0]
    s = MemoryNonceStore(max_entries=2, clock=lambda: now[0])
    assert s.check("ns", "n1", 2000) and not s.check("ns", "n1", 2000)
    assert s.check("other", "n1", 2000), "keyed by namespace and nonce"
    with pytest.raises(RuntimeError, match="full"):
        s.check("ns", "n2", 2000)
    now[0] = 2001
    assert s.check("ns", "n1", 3000)


def hello(environ, start_response):
    agent = environ["idn.agent"]
    body = json.dumps({"namespace": agent.namespace, "subject": agent.subject, "fingerprint": agent.fingerprint,
                       "body": environ["wsgi.input"].read().decode()}).encode()
    start_response("200 OK", [("content-type", "application/json")])
    return [body]


class _Quiet(WSGIRequestHandler):
    def log_message(self, *args):
        pass


def test_wsgi_middleware_behind_a_real_server():
    srv = make_server("127.0.0.1", 0, IdnWSGIMiddleware(hello, nonces=MemoryNonceStore()), handler_class=_Quiet)
    threading.Thread(target=srv.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True).start()
    origin = f"http://127.0.0.1:{srv.server_port}"
    try:
        agent = idn.Identity.create("wsgi-caller")
        with requests.Session() as s:
            s.auth = IdnAuth(agent, subject="Zoë")
            r = s.post(origin + "/items?q=1", data=b'{"a":1}')
            assert r.json() == {"namespace": "wsgi-caller", "subject": "Zoë", "fingerprint": agent.fingerprint, "body": '{"a":1}'}
        refused = requests.get(origin + "/items")
        assert refused.status_code == 403 and refused.headers["idn-error"] == "AUTH_IDENTITY_INVALID"
        assert idn.read_error(refused).code == "AUTH_IDENTITY_INVALID"
    finally:
        srv.shutdown()
        srv.server_close()


def test_asgi_middleware():
    async def app(scope, receive, send):
        msg = await receive()
        agent = scope["idn.agent"]
        await send({"type": "http.response.start", "status": 200, "headers": []})
        await send({"type": "http.response.body", "body": f"{agent.subject}:{msg['body'].decode()}".encode()})

    agent = idn.Identity.create("asgi-caller")
    signed = agent.sign("PUT", "http://svc.example/x?y=1", b"payload", subject="山田")
    mw = IdnASGIMiddleware(app, nonces=MemoryNonceStore())

    async def call(headers, body):
        sent, chunks = [], [{"type": "http.request", "body": body[:3], "more_body": True}, {"type": "http.request", "body": body[3:]}]

        async def receive():
            return chunks.pop(0)

        async def send(m):
            sent.append(m)

        scope = {"type": "http", "method": "PUT", "scheme": "http", "path": "/x", "raw_path": b"/x", "query_string": b"y=1",
                 "headers": [(k.encode(), v.encode()) for k, v in headers.items()] + [(b"host", b"svc.example")]}
        await mw(scope, receive, send)
        return sent

    ok = asyncio.run(call(signed, b"payload"))
    assert ok[0]["status"] == 200 and ok[1]["body"] == "山田:payload".encode()
    replay = asyncio.run(call(signed, b"payload"))
    assert replay[0]["status"] == 403 and (b"idn-error", b"AUTH_REPLAY_DETECTED") in replay[0]["headers"]


@pytest.mark.parametrize("status,code", [("pending", "AUTH_CLAIM_REQUIRED"), ("rejected", "AUTH_CLAIM_REJECTED"),
                                         ("revoked", "AUTH_CLAIM_REVOKED"), ("approved", None)])
def test_control_plane_claims_decide_as_the_gateway(status, code):
    """A loopback server answering as the control plane's /v1/verify and
    POST /v1/claims do; it checks that each call is signed."""
    from verifier import Recorder

    def answer(n):
        if n == 1:
            return 200, {}, {"authorized": False, "claim_id": "clm_1", "status": status}
        return 200, {}, {"claim_id": "clm_1", "status": status, "namespace": "caller-ns"}

    cp = Recorder(answer)
    try:
        service = idn.Identity.create("weather-service")
        claims = idn.verify.ControlPlaneClaims(cp.origin, "idn_sk_test", "weather", service)
        agent = verify_request(*_signed_get(), nonces=MemoryNonceStore())
        d = claims(agent)
        assert (d.authorized, d.code) == (code is None, code)
        if code:
            assert (d.claim_id, d.claim_status) == ("clm_1", status)
        verify, filed = cp.seen
        assert verify["path"].startswith("/v1/verify?namespace=caller-ns&") and "service=weather" in verify["path"]
        assert filed["method"] == "POST" and json.loads(filed["body"])["subject"] == "Zoë"
        assert [x["verdict"] for x in cp.seen] == ["ok", "ok"], "signed as the service"
        assert all(x["headers"]["authorization"] == "Bearer idn_sk_test" for x in cp.seen)
    finally:
        cp.close()


def _signed_get():
    caller = idn.Identity.create("caller-ns")
    url = "https://svc.example/x"
    return "GET", url, caller.sign("GET", url, subject="Zoë"), b""

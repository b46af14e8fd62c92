"""A test-only verifier and server: rebuilds the signature base a server
would from a received request and checks the signature with the agent's
key, as docs/profile.md describes. The SDK itself only signs."""

import base64
import hashlib
import json
import re
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

from cryptography.exceptions import InvalidSignature
from cryptography.hazmat.primitives.asymmetric.ed25519 import Ed25519PublicKey


def verify_received(method, origin, target, headers, body):
    m = re.fullmatch(r'sig1=\(([^)]*)\)(.*)', headers.get("signature-input") or "")
    if not m:
        return "no signature-input"
    lines = []
    for c in (x[1:-1] for x in m.group(1).split(" ")):
        if c == "@method":
            lines.append(f'"@method": {method.lower()}')
        elif c == "@target-uri":
            lines.append(f'"@target-uri": {origin}{target}')
        else:
            lines.append(f'"{c}": {headers.get(c)}')
    lines.append(f'"@signature-params": ({m.group(1)}){m.group(2)}')
    if body and headers.get("content-digest") != "sha-256=:" + base64.b64encode(hashlib.sha256(body).digest()).decode() + ":":
        return "content-digest mismatch"
    key = Ed25519PublicKey.from_public_bytes(base64.b64decode(headers["idn-agent-key"][8:]))
    try:
        key.verify(base64.b64decode(headers["signature"][6:-1]), "\n".join(lines).encode())
    except InvalidSignature:
        return "bad signature"
    return "ok"


class Recorder:
    """A loopback HTTP server that records each request with its verdict
    and answers 200 {"verdict": ...}, or what answer(n) returns."""

    def __init__(self, answer=None):
        self.seen = []
        rec = self

        class Handler(BaseHTTPRequestHandler):
            def _serve(self):
                n = int(self.headers.get("content-length") or 0)
                body = self.rfile.read(n) if n else b""
                headers = {k.lower(): v for k, v in self.headers.items()}
                verdict = verify_received(self.command, rec.origin, self.path, headers, body)
                rec.seen.append({"method": self.command, "path": self.path, "headers": headers, "body": body, "verdict": verdict})
                status, extra, payload = (answer(len(rec.seen)) if answer else (200, {}, {"verdict": verdict}))
                data = json.dumps(payload).encode()
                self.send_response(status)
                self.send_header("content-type", "application/json")
                self.send_header("content-length", str(len(data)))
                for k, v in extra.items():
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            do_GET = do_POST = do_PUT = do_DELETE = _serve

            def log_message(self, *args):
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.origin = f"http://127.0.0.1:{self.server.server_address[1]}"
        self.thread = threading.Thread(target=self.server.serve_forever, kwargs={"poll_interval": 0.02}, daemon=True)
        self.thread.start()

    def close(self):
        self.server.shutdown()
        self.server.server_close()

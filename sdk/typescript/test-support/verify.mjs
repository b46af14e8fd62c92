// A test-only verifier: rebuilds the signature base a server would from a
// received request and checks the signature with the agent's key, as
// docs/profile.md describes. The SDK itself only signs.
import { createPublicKey, verify, createHash } from "node:crypto";

export function verifyReceived(req, body, origin) {
  const h = req.headers;
  const input = h["signature-input"];
  const m = /^sig1=\(([^)]*)\)(.*)$/.exec(input ?? "");
  if (!m) return "no signature-input";
  const components = m[1].split(" ").map((c) => c.slice(1, -1));
  const lines = components.map((c) => {
    if (c === "@method") return `"@method": ${req.method.toLowerCase()}`;
    if (c === "@target-uri") return `"@target-uri": ${origin}${req.url}`;
    return `"${c}": ${h[c]}`;
  });
  lines.push(`"@signature-params": (${m[1]})${m[2]}`);
  if (body.length > 0 && h["content-digest"] !== `sha-256=:${createHash("sha256").update(body).digest("base64")}:`) return "content-digest mismatch";
  const raw = Buffer.from(h["idn-agent-key"].slice("ed25519:".length), "base64");
  const key = createPublicKey({ key: Buffer.concat([Buffer.from("302a300506032b6570032100", "hex"), raw]), format: "der", type: "spki" });
  return verify(null, Buffer.from(lines.join("\n")), key, Buffer.from(h.signature.slice(6, -1), "base64")) ? "ok" : "bad signature";
}

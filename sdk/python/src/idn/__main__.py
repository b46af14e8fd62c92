"""``python -m idn init <namespace> [--name NAME] [--force] [--json]``:
writes the identity ``idn init`` writes, in the same place, and says what
comes next."""

from __future__ import annotations

import argparse
import json
import sys
from typing import Optional, Sequence

from ._rules import validate_name, validate_namespace
from .identity import Identity, idn_home


def _next_steps(ident: Identity) -> str:
    return f"""
Next:
  A namespace belongs to an owner: the person who signed up with it on the
  control plane's dashboard, and who approves the agents that sign under it.
  Sign under your owner's namespace (the quickstart's is quickstart-agent);
  a namespace nobody signed up with is answered 404 NAMESPACE_NOT_FOUND.

  The first request through a gateway is refused with 403
  AUTH_CLAIM_REQUIRED and files a claim; the owner approves it on the
  dashboard's claims page, where this key shows as {ident.fingerprint}.
  wait_for_approval (Python) or waitForApproval (TypeScript) waits for that.
"""


def _init(args: argparse.Namespace) -> None:
    path = Identity.path(args.namespace)
    verb = "Created"
    if path.exists() and not args.force:
        if not args.name:
            raise RuntimeError(f"idn: an identity for {args.namespace!r} already exists at {path}; "
                               "use --force to replace it, or --name to rename it")
        ident = Identity.load(args.namespace)
        ident.rename(args.name)
        verb = "Renamed"
    else:
        ident = Identity.create(args.namespace, name=args.name or None)
    ident.save()
    if args.json:
        print(json.dumps({"namespace": ident.namespace, "name": ident.name or "", "did": ident.did, "keyId": ident.key_id,
                          "publicKey": ident.public_key, "fingerprint": ident.fingerprint, "file": str(path)},
                         indent=2, ensure_ascii=False))
        return
    name = ident.name or f"(none; set one with python -m idn init {ident.namespace} --name NAME)"
    print(f"""{verb} identity {ident.namespace}
Namespace:   {ident.namespace}
Name:        {name}
DID:         {ident.did}
Key id:      {ident.key_id}
Public key:  {ident.public_key}
Fingerprint: {ident.fingerprint}
File:        {path}
Home:        {idn_home()}
{_next_steps(ident)}""", end="")


def main(argv: Optional[Sequence[str]] = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m idn", description="Make an idn agent identity.")
    commands = parser.add_subparsers(dest="command", required=True)
    init = commands.add_parser("init", help="create (or rename) the identity of a namespace")
    init.add_argument("namespace")
    init.add_argument("--name", help="the agent's display name, shown to owners on its claims; "
                                     "on an existing identity, renames it and keeps its key")
    init.add_argument("--force", action="store_true", help="replace an existing identity (a new key)")
    init.add_argument("--json", action="store_true", help="print the identity as JSON")
    args = parser.parse_args(argv)
    try:
        validate_namespace(args.namespace)
        if args.name:
            validate_name(args.name)
    except ValueError as e:
        parser.error(str(e))  # exit status 2
    try:
        _init(args)
    except (OSError, RuntimeError, ValueError) as e:
        print(e if str(e).startswith("idn:") else f"idn: {e}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env bash
# Compiles IDNRegistry.sol with solc 0.8.37 (solcjs from the npm registry,
# installed into a temporary directory that is removed afterwards) into
# IDNRegistry.abi and IDNRegistry.bin, then regenerates the Go bindings from
# them. The compiler settings live here and nowhere else.
#
#   registry/contracts/build.sh           write the artifacts beside this script
#   registry/contracts/build.sh DIR       write IDNRegistry.abi and .bin into DIR
#                                         only (the Go test that checks the
#                                         committed artifacts does this)
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
out="${1:-$here}"
mkdir -p "$out"
work="$(mktemp -d)"
trap 'rm -rf "$work"' EXIT

npm install --silent --no-save --no-audit --no-fund --no-package-lock \
	--prefix "$work" solc@0.8.37 >/dev/null

node - "$here/IDNRegistry.sol" "$out" "$work/node_modules/solc" <<'JS'
const fs = require("fs");
const path = require("path");
const [source, out, solcPath] = process.argv.slice(2);
const solc = require(solcPath);
if (!solc.version().startsWith("0.8.37+")) {
  throw new Error("solc " + solc.version() + " is not 0.8.37");
}
const input = {
  language: "Solidity",
  sources: { "IDNRegistry.sol": { content: fs.readFileSync(source, "utf8") } },
  settings: {
    // Cancun runs on Base, Base Sepolia and go-ethereum's simulated chain.
    evmVersion: "cancun",
    optimizer: { enabled: true, runs: 200 },
    outputSelection: { "IDNRegistry.sol": { IDNRegistry: ["abi", "evm.bytecode.object"] } },
  },
};
const output = JSON.parse(solc.compile(JSON.stringify(input)));
const problems = (output.errors || []).filter((e) => e.severity === "error" || e.type === "Warning");
if (problems.length > 0) {
  for (const e of problems) console.error(e.formattedMessage);
  process.exit(1);
}
const contract = output.contracts["IDNRegistry.sol"].IDNRegistry;
fs.writeFileSync(path.join(out, "IDNRegistry.abi"), JSON.stringify(contract.abi, null, 2) + "\n");
fs.writeFileSync(path.join(out, "IDNRegistry.bin"), contract.evm.bytecode.object + "\n");
JS

if [ "$#" -eq 0 ]; then
	cd "$here/../.."
	go test ./registry/evm/internal/idnregistry -run TestBindings -update >/dev/null
fi

package idnregistry

import (
	"bytes"
	"flag"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/ethereum/go-ethereum/accounts/abi/abigen"
)

var update = flag.Bool("update", false, "rewrite idnregistry.go from the committed ABI and bytecode")

const contracts = "../../../contracts"

// bindings is what abigen's v2 generator makes of the committed artifacts.
func bindings(t *testing.T) []byte {
	t.Helper()
	abiJSON, err := os.ReadFile(filepath.Join(contracts, "IDNRegistry.abi"))
	if err != nil {
		t.Fatal(err)
	}
	bin, err := os.ReadFile(filepath.Join(contracts, "IDNRegistry.bin"))
	if err != nil {
		t.Fatal(err)
	}
	code, err := abigen.BindV2([]string{"IDNRegistry"}, []string{string(abiJSON)},
		[]string{strings.TrimSpace(string(bin))}, "idnregistry", nil, nil)
	if err != nil {
		t.Fatal(err)
	}
	return []byte(code)
}

// TestBindings: idnregistry.go is exactly what abigen generates from the
// committed ABI and bytecode (-update rewrites it).
func TestBindings(t *testing.T) {
	want := bindings(t)
	if *update {
		if err := os.WriteFile("idnregistry.go", want, 0o644); err != nil {
			t.Fatal(err)
		}
		return
	}
	got, err := os.ReadFile("idnregistry.go")
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, want) {
		t.Fatal("idnregistry.go differs from the bindings of the committed ABI and bytecode: run registry/contracts/build.sh")
	}
}

// TestArtifactsMatchSource compiles IDNRegistry.sol with solc 0.8.37 (the
// build script fetches solcjs from the npm registry) and compares the result
// with the committed ABI and bytecode. It needs node and npm; without them
// it is skipped, except in CI, where node is part of the machine.
func TestArtifactsMatchSource(t *testing.T) {
	if testing.Short() {
		t.Skip("compiling the contract takes seconds and the npm registry: skipped with -short")
	}
	for _, tool := range []string{"node", "npm"} {
		if _, err := exec.LookPath(tool); err != nil {
			if os.Getenv("CI") == "true" {
				t.Fatalf("%s is missing: CI must check the contract artifacts against IDNRegistry.sol", tool)
			}
			t.Skipf("%s is not installed: the committed contract artifacts are not checked against IDNRegistry.sol", tool)
		}
	}
	out := t.TempDir()
	cmd := exec.Command("bash", filepath.Join(contracts, "build.sh"), out)
	if b, err := cmd.CombinedOutput(); err != nil {
		t.Fatalf("build.sh: %v\n%s", err, b)
	}
	for _, name := range []string{"IDNRegistry.abi", "IDNRegistry.bin"} {
		got, err := os.ReadFile(filepath.Join(out, name))
		if err != nil {
			t.Fatal(err)
		}
		want, err := os.ReadFile(filepath.Join(contracts, name))
		if err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(got, want) {
			t.Errorf("%s does not match IDNRegistry.sol compiled by solc 0.8.37: run registry/contracts/build.sh and commit the result", name)
		}
	}
}

package main

import (
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"strings"
	"time"

	"github.com/idnhq/idn/identity"
)

func cmdInit(args []string, e env) error {
	fs := newFlagSet("init")
	force := fs.Bool("force", false, "replace an existing identity (a new key)")
	name := fs.String("name", "", "the agent's display name, shown to owners on its claims; on an existing identity, renames it and keeps its key")
	asJSON := fs.Bool("json", false, "print the identity as JSON")
	pos, err := parseInterleaved(fs, args, e)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: idn init <namespace> [--name NAME] [--force] [--json]", errUsage)
	}
	ns := pos[0]
	if err := identity.ValidNamespace(ns); err != nil {
		return fmt.Errorf("%w: bad namespace %q: use 3-64 characters of a-z, A-Z, 0-9 and inner hyphens", errUsage, ns)
	}
	if *name != "" {
		if err := identity.ValidName(*name); err != nil {
			return fmt.Errorf("%w: bad --name: %v", errUsage, strings.TrimPrefix(err.Error(), "identity: "))
		}
	}
	h, err := home(e)
	if err != nil {
		return err
	}
	path := identity.Path(h, ns)
	verb := "Created"
	var id *identity.Identity
	if _, err := os.Stat(path); err == nil && !*force {
		if *name == "" {
			return fmt.Errorf("an identity for %q already exists at %s; use --force to replace it, or --name to rename it", ns, path)
		}
		if id, err = identity.Load(h, ns); err != nil {
			return err
		}
		if err := id.Rename(*name, time.Now()); err != nil {
			return err
		}
		verb = "Renamed"
	} else if id, err = identity.NewNamed(ns, *name); err != nil {
		return err
	}
	if err := id.Save(h); err != nil {
		return err
	}
	if *asJSON {
		return printIdentityJSON(e, id, path)
	}
	fmt.Fprintf(e.stdout, "%s identity %s\n", verb, ns)
	printIdentity(e, id, path)
	return nil
}

func cmdWhoami(args []string, e env) error {
	fs := newFlagSet("whoami")
	ns := fs.String("namespace", "", "identity to show")
	asJSON := fs.Bool("json", false, "print the identity as JSON")
	pos, err := parseInterleaved(fs, args, e)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return fmt.Errorf("%w: idn whoami [--namespace NS] [--json]", errUsage)
	}
	id, path, err := loadIdentity(e, *ns)
	if err != nil {
		return err
	}
	if *asJSON {
		return printIdentityJSON(e, id, path)
	}
	printIdentity(e, id, path)
	return nil
}

func printIdentity(e env, id *identity.Identity, path string) {
	name := id.Name()
	if name == "" {
		name = "(none; set one with idn init " + id.Namespace + " --name NAME)"
	}
	fmt.Fprintf(e.stdout, "Namespace:  %s\nName:       %s\nDID:        %s\nKey id:     %s\nPublic key: %s\nMultibase:  %s\nFile:       %s\n",
		id.Namespace, name, id.DID(), id.KeyID(), id.PublicKeyString(), identity.Multibase(id.PublicKey), path)
}

// identityJSON is what --json prints for an identity: public parts only.
type identityJSON struct {
	Namespace string `json:"namespace"`
	Name      string `json:"name"`
	DID       string `json:"did"`
	KeyID     string `json:"keyId"`
	PublicKey string `json:"publicKey"`
	Multibase string `json:"multibase"`
	File      string `json:"file"`
}

func printIdentityJSON(e env, id *identity.Identity, path string) error {
	return writeJSON(e, identityJSON{
		Namespace: id.Namespace, Name: id.Name(), DID: id.DID(), KeyID: id.KeyID(),
		PublicKey: id.PublicKeyString(), Multibase: identity.Multibase(id.PublicKey), File: path,
	})
}

// writeJSON prints v as indented JSON followed by a newline.
func writeJSON(e env, v any) error {
	enc := json.NewEncoder(e.stdout)
	enc.SetEscapeHTML(false)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

// loadIdentity loads the identity named ns, or the only one in the home.
func loadIdentity(e env, ns string) (*identity.Identity, string, error) {
	h, err := home(e)
	if err != nil {
		return nil, "", err
	}
	if ns == "" {
		names, err := identity.List(h)
		if err != nil {
			return nil, "", err
		}
		switch len(names) {
		case 0:
			return nil, "", fmt.Errorf("no identity in %s; create one with 'idn init <namespace>'", h)
		case 1:
			ns = names[0]
		default:
			return nil, "", fmt.Errorf("several identities in %s (%s); choose one with --namespace", h, strings.Join(names, ", "))
		}
	} else if err := identity.ValidNamespace(ns); err != nil {
		return nil, "", fmt.Errorf("%w: bad namespace %q", errUsage, ns)
	}
	id, err := identity.Load(h, ns)
	if errors.Is(err, identity.ErrNotFound) {
		return nil, "", fmt.Errorf("no identity %q in %s; create one with 'idn init %s'", ns, h, ns)
	}
	if err != nil {
		return nil, "", err
	}
	return id, identity.Path(h, ns), nil
}

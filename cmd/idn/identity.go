package main

import (
	"errors"
	"fmt"
	"os"
	"strings"

	"github.com/idnhq/idn/identity"
)

func cmdInit(args []string, e env) error {
	fs := newFlagSet("init")
	force := fs.Bool("force", false, "replace an existing identity")
	pos, err := parseInterleaved(fs, args, e)
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: idn init <namespace> [--force]", errUsage)
	}
	ns := pos[0]
	if err := identity.ValidNamespace(ns); err != nil {
		return fmt.Errorf("%w: bad namespace %q: use 3-64 characters of a-z, A-Z, 0-9 and inner hyphens", errUsage, ns)
	}
	h, err := home(e)
	if err != nil {
		return err
	}
	path := identity.Path(h, ns)
	if _, err := os.Stat(path); err == nil && !*force {
		return fmt.Errorf("an identity for %q already exists at %s; use --force to replace it", ns, path)
	}
	id, err := identity.New(ns)
	if err != nil {
		return err
	}
	if err := id.Save(h); err != nil {
		return err
	}
	fmt.Fprintf(e.stdout, "Created identity %s\n", ns)
	printIdentity(e, id, path)
	return nil
}

func cmdWhoami(args []string, e env) error {
	fs := newFlagSet("whoami")
	ns := fs.String("namespace", "", "identity to show")
	pos, err := parseInterleaved(fs, args, e)
	if err != nil {
		return err
	}
	if len(pos) != 0 {
		return fmt.Errorf("%w: idn whoami [--namespace NS]", errUsage)
	}
	id, path, err := loadIdentity(e, *ns)
	if err != nil {
		return err
	}
	printIdentity(e, id, path)
	return nil
}

func printIdentity(e env, id *identity.Identity, path string) {
	fmt.Fprintf(e.stdout, "Namespace:  %s\nDID:        %s\nKey id:     %s\nPublic key: %s\nMultibase:  %s\nFile:       %s\n",
		id.Namespace, id.DID(), id.KeyID(), id.PublicKeyString(), identity.Multibase(id.PublicKey), path)
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

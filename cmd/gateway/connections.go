package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"strconv"
	"strings"
	"text/tabwriter"
	"time"

	"github.com/idnhq/idn/approval"
	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/gateway"
	"github.com/idnhq/idn/mcpevent"
	"github.com/idnhq/idn/mcpproxy"
)

func init() {
	register(&command{name: "list", summary: "list connections", run: runList})
	register(&command{name: "add", summary: "add a connection with its secrets", run: runAdd})
	register(&command{name: "test", summary: "probe a connection's upstream with its credential (an MCP handshake for an mcp connection)", run: runTest})
	register(&command{name: "rotate", summary: "replace a connection's secrets (new secret version)", run: runRotate})
	register(&command{name: "delete", summary: "delete a connection and its secrets", run: runDelete})
}

func jsonFlag(fs *flag.FlagSet) *bool { return fs.Bool("json", false, "print JSON instead of a table") }

func idFlag(fs *flag.FlagSet) *string { return fs.String("id", "", "connection id (required)") }

func requireID(id string) error {
	if id == "" {
		return usagef("--id is required")
	}
	return credvault.ValidateConnectionID(id)
}

func printJSON(w io.Writer, v any) error {
	enc := json.NewEncoder(w)
	enc.SetIndent("", "  ")
	return enc.Encode(v)
}

func printConnections(w io.Writer, conns []*credvault.Connection) error {
	tw := tabwriter.NewWriter(w, 0, 4, 2, ' ', 0)
	fmt.Fprintln(tw, "ID\tNAME\tPROTOCOL\tAUTH\tSTATUS\tVERSION\tSECRETS\tLAST TEST\tBASE URL")
	for _, c := range conns {
		last := "-"
		if c.LastTest != nil {
			last = "ok"
			if !c.LastTest.OK {
				last = "failed"
			}
			if c.LastTest.Status != 0 {
				last += " " + strconv.Itoa(c.LastTest.Status)
			}
		}
		fmt.Fprintf(tw, "%s\t%s\t%s\t%s\t%s\t%d\t%s\t%s\t%s\n", c.ID, dash(c.Name), c.Protocol, dash(c.AuthMode), c.Status,
			c.SecretVersion, dash(strings.Join(c.CredentialKeys, ",")), last, c.BaseURL)
	}
	return tw.Flush()
}

func dash(s string) string {
	if s == "" {
		return "-"
	}
	return s
}

func runList(ctx context.Context, env *cliEnv, args []string) error {
	const synopsis = "[--json]"
	fs := newFlagSet("list")
	asJSON := jsonFlag(fs)
	if err := parseFlags(env, fs, synopsis, args); err != nil {
		return err
	}
	v, closeVault, err := openVault(ctx, env, fs)
	if err != nil {
		return err
	}
	defer closeVault()
	conns := v.Connections()
	if *asJSON {
		return printJSON(env.stdout, conns)
	}
	return printConnections(env.stdout, conns)
}

func runAdd(ctx context.Context, env *cliEnv, args []string) error {
	const synopsis = "--id ID --base-url URL --auth-mode MODE --auth-secret-key NAME --secret NAME=VALUE [flags]"
	fs := newFlagSet("add")
	var (
		c       credvault.Connection
		mcp     mcpproxy.Settings
		secrets secretsFlag
		allow   listFlag
		deny    listFlag
		scopes  listFlag
		tools   listFlag
		routes  listFlag
		held    = map[string]approval.Rules{}
	)
	fs.StringVar(&c.ID, "id", "", "connection id (required): letters, digits, '-' and '_'")
	fs.StringVar(&c.Name, "name", "", "human-readable name")
	fs.StringVar(&c.Service, "service", "", "service slug of the claims for this connection (default: the id)")
	fs.StringVar(&c.Protocol, "protocol", "http", "http or mcp")
	fs.StringVar(&c.BaseURL, "base-url", "", "upstream base URL (required)")
	fs.StringVar(&c.AuthMode, "auth-mode", "", "bearer, header_key, query_param, oauth2_client_credentials or oauth2_authorization_code")
	fs.StringVar(&c.AuthPrefix, "auth-prefix", "", `prefix before the secret (default "Bearer " in bearer mode)`)
	fs.StringVar(&c.AuthSecretKey, "auth-secret-key", "", "name of the --secret used for upstream auth")
	fs.BoolVar(&c.AllowUpstreamCookies, "allow-upstream-cookies", false,
		"let the upstream's Set-Cookie reach agents and their Cookie reach the upstream (dropped by default)")
	fs.Var(&secrets, "secret", "secret as name=value (value - reads it from stdin); repeatable; the value may reference a variable as {{KEY}}")
	oauthFlags(fs, &c, &scopes)
	fs.StringVar(&mcp.Endpoint, "mcp-endpoint", "", "MCP endpoint: a path or a full URL")
	fs.Var(&allow, "mcp-allow", "MCP tool to allow (wildcards * and ?); repeatable")
	fs.Var(&deny, "mcp-deny", "MCP tool to deny (wildcards * and ?); repeatable")
	fs.Var(&tools, "approval-tool", "MCP tool whose calls wait for the owner's passkey approval (wildcards * and ?); repeatable")
	fs.Var(&routes, "approval-route", `HTTP route whose calls wait for the owner's passkey approval, "METHOD /path-glob"; repeatable`)
	fs.Var(subjectRulesFlag{rules: held, route: false}, "approval-subject-tool", "SUBJECT=PATTERN: an MCP tool whose calls for that idn-subject also wait for approval; repeatable")
	fs.Var(subjectRulesFlag{rules: held, route: true}, "approval-subject-route", `SUBJECT="METHOD /path-glob": an HTTP route whose calls for that idn-subject also wait for approval; repeatable`)
	fs.BoolVar(&mcp.ExposeResources, "mcp-expose-resources", false, "pass the upstream's MCP resources through /mcp/{id} (off by default)")
	fs.BoolVar(&mcp.ExposePrompts, "mcp-expose-prompts", false, "pass the upstream's MCP prompts through /mcp/{id} (off by default)")
	asJSON := jsonFlag(fs)
	if err := parseFlags(env, fs, synopsis, args); err != nil {
		return err
	}
	if err := secrets.check(env.stdin); err != nil {
		return err
	}
	if err := requireID(c.ID); err != nil {
		return err
	}
	mcp.ToolAllowlist, mcp.ToolDenylist = allow, deny
	c.OAuthScopes = scopes
	c.ApprovalTools, c.ApprovalRoutes = tools, routes
	if len(held) > 0 {
		c.ApprovalSubjects = held
	}
	c.Extensions = mcp.Members()
	if c.AuthMode != "" && c.AuthSecretKey == "" && len(secrets.values) == 1 {
		for name := range secrets.values {
			c.AuthSecretKey = name // the only secret is evidently the auth secret
		}
	}
	v, closeVault, err := openVault(ctx, env, fs)
	if err != nil {
		return err
	}
	defer closeVault()
	created, err := v.Create(ctx, &c, secrets.values)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(env.stdout, created)
	}
	return printConnections(env.stdout, []*credvault.Connection{created})
}

func runTest(ctx context.Context, env *cliEnv, args []string) error {
	const synopsis = "--id ID [--method GET] [--path /] [--json]"
	fs := newFlagSet("test")
	id := idFlag(fs)
	method := fs.String("method", "GET", "HTTP method of the probe")
	path := fs.String("path", "/", "path (and query) relative to the base URL and path prefix")
	asJSON := jsonFlag(fs)
	if err := parseFlags(env, fs, synopsis, args); err != nil {
		return err
	}
	if err := requireID(*id); err != nil {
		return err
	}
	v, closeVault, err := openVault(ctx, env, fs)
	if err != nil {
		return err
	}
	defer closeVault()
	if c, ok := v.Lookup(*id); ok && c.Connection.Protocol == credvault.ProtocolMCP {
		return testMCP(ctx, env, v, *id, *asJSON)
	}
	res, err := v.Test(ctx, *id, credvault.TestRequest{Method: *method, Path: *path}, nil)
	if err != nil {
		return err
	}
	if *asJSON {
		if err := printJSON(env.stdout, res); err != nil {
			return err
		}
	} else {
		verdict := "ok"
		if !res.OK {
			verdict = "failed"
		}
		fmt.Fprintf(env.stdout, "%s: %s status=%d latency=%dms\n", *id, verdict, res.Status, res.LatencyMS)
	}
	if !res.OK {
		return errors.New("test failed: " + res.Error)
	}
	return nil
}

// testMCP tests the mcp connection id with an MCP handshake, records the
// outcome as its last test, and prints it as the admin API answers it.
func testMCP(ctx context.Context, env *cliEnv, v *credvault.Vault, id string, asJSON bool) error {
	start := time.Now()
	hs, err := gateway.TestMCP(ctx, v, id)
	if errors.Is(err, credvault.ErrNotFound) {
		return err
	}
	res := credvault.TestResult{OK: err == nil, Status: hs.Status, LatencyMS: time.Since(start).Milliseconds(), TestedAt: time.Now().UTC()}
	if err != nil {
		res.Error = err.Error()
	}
	if err := v.RecordTest(ctx, id, res); err != nil {
		return err
	}
	if asJSON {
		out := struct {
			credvault.TestResult
			MCP *mcpevent.Handshake `json:"mcp,omitempty"`
		}{TestResult: res}
		if hs.ServerName != "" || hs.ProtocolVersion != "" {
			out.MCP = &hs
		}
		if err := printJSON(env.stdout, out); err != nil {
			return err
		}
	} else if res.OK {
		fmt.Fprintf(env.stdout, "%s: ok server=%q version=%q protocol=%s tools=%d latency=%dms\n", id, hs.ServerName, hs.ServerVersion, hs.ProtocolVersion, hs.Tools, res.LatencyMS)
	} else {
		fmt.Fprintf(env.stdout, "%s: failed status=%d latency=%dms\n", id, res.Status, res.LatencyMS)
	}
	if !res.OK {
		return errors.New("test failed: " + res.Error)
	}
	return nil
}

func runRotate(ctx context.Context, env *cliEnv, args []string) error {
	const synopsis = "--id ID --secret NAME=VALUE [--delete-secret NAME] [--reason R] [--json]"
	fs := newFlagSet("rotate")
	id := idFlag(fs)
	var secrets secretsFlag
	fs.Var(&secrets, "secret", "new secret as name=value (value - reads it from stdin); repeatable; secrets not named are kept")
	var remove listFlag
	fs.Var(&remove, "delete-secret", "name of a secret to delete; repeatable")
	reason := fs.String("reason", "manual", "why: scheduled, compromised, manual, ...")
	by := fs.String("rotated-by", "cli", "who rotates, recorded in rotation_history")
	asJSON := jsonFlag(fs)
	if err := parseFlags(env, fs, synopsis, args); err != nil {
		return err
	}
	if err := secrets.check(env.stdin); err != nil {
		return err
	}
	if err := requireID(*id); err != nil {
		return err
	}
	rot := credvault.Rotation{Secrets: map[string]*string{}, Reason: *reason, RotatedBy: *by}
	for name, val := range secrets.values {
		rot.Secrets[name] = &val
	}
	for _, name := range remove {
		rot.Secrets[name] = nil
	}
	v, closeVault, err := openVault(ctx, env, fs)
	if err != nil {
		return err
	}
	defer closeVault()
	c, err := v.Rotate(ctx, *id, rot)
	if err != nil {
		return err
	}
	if *asJSON {
		return printJSON(env.stdout, c)
	}
	fmt.Fprintf(env.stdout, "%s: rotated to secret version %d (secrets: %s)\n", c.ID, c.SecretVersion, strings.Join(c.CredentialKeys, ","))
	return nil
}

func runDelete(ctx context.Context, env *cliEnv, args []string) error {
	const synopsis = "--id ID"
	fs := newFlagSet("delete")
	id := idFlag(fs)
	if err := parseFlags(env, fs, synopsis, args); err != nil {
		return err
	}
	if err := requireID(*id); err != nil {
		return err
	}
	v, closeVault, err := openVault(ctx, env, fs)
	if err != nil {
		return err
	}
	defer closeVault()
	res, found := v.Lookup(*id)
	if err := v.Delete(ctx, *id); err != nil {
		return err
	}
	fmt.Fprintf(env.stdout, "%s: deleted\n", *id)
	if found {
		revokeAccounts(ctx, env, v, res)
	}
	return nil
}

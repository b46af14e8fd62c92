// Package catalog is a connection's discovered tools as the proxy serves
// them: an immutable list with a lookup by name and each tool's argument
// schema compiled on first use.
package catalog

import (
	"encoding/json"
	"slices"
	"strings"
	"sync"

	"github.com/idnhq/idn/mcpproxy/internal/arguments"
	"github.com/idnhq/idn/mcpproxy/internal/scrub"
	"github.com/idnhq/idn/mcpproxy/mcpsettings"
	"github.com/idnhq/idn/mcpproxy/toolpin"
	"github.com/modelcontextprotocol/go-sdk/mcp"
)

// Catalog is one discovery of a connection's tools, sorted by name. It is
// safe for concurrent use and never changes: a new discovery is a new
// Catalog.
type Catalog struct {
	// Discovery is the discovery, its tools sorted by name.
	Discovery mcpsettings.Discovery
	// Names are the tools' names, in Discovery's order.
	Names []string

	byName  map[string]int
	schemas sync.Map // tool name → *arguments.Schema or error
	pins    sync.Map // tool name → toolpin.Listed
}

// New returns the catalog of d, whose tools it sorts in place.
func New(d mcpsettings.Discovery) *Catalog {
	slices.SortFunc(d.Tools, func(a, b mcpsettings.Tool) int { return strings.Compare(a.Name, b.Name) })
	c := &Catalog{Discovery: d, byName: make(map[string]int, len(d.Tools))}
	for i, t := range d.Tools {
		c.Names = append(c.Names, t.Name)
		c.byName[t.Name] = i
	}
	return c
}

// Succeeded reports whether c holds a successful discovery (nil does not).
func (c *Catalog) Succeeded() bool { return c != nil && !c.Discovery.DiscoveredAt.IsZero() }

// Has reports whether the server lists tool.
func (c *Catalog) Has(tool string) bool {
	_, ok := c.byName[tool]
	return ok
}

// Tool returns the tool named name, which the server lists (Has).
func (c *Catalog) Tool(name string) mcpsettings.Tool { return c.Discovery.Tools[c.byName[name]] }

// Schema returns tool's compiled argument schema, or why it cannot be
// compiled; tool is one the server lists (Has).
func (c *Catalog) Schema(tool string) (*arguments.Schema, error) {
	if v, ok := c.schemas.Load(tool); ok {
		if ts, ok := v.(*arguments.Schema); ok {
			return ts, nil
		}
		return nil, v.(error)
	}
	ts, err := arguments.Compile(c.Tool(tool).InputSchema)
	if err != nil {
		c.schemas.Store(tool, err)
		return nil, err
	}
	c.schemas.Store(tool, ts)
	return ts, nil
}

// Pin returns tool's definition as package toolpin pins it, with its
// hash ("" when it has none: it cannot be pinned); tool is one the server
// lists (Has).
func (c *Catalog) Pin(tool string) toolpin.Listed {
	if v, ok := c.pins.Load(tool); ok {
		return v.(toolpin.Listed)
	}
	t := c.Tool(tool)
	d := toolpin.Definition{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: t.InputSchema, OutputSchema: t.OutputSchema}
	if t.Annotations != nil {
		d.Annotations, _ = json.Marshal(t.Annotations)
	}
	l := toolpin.Listed{Definition: d}
	l.SHA256, _ = toolpin.Hash(d)
	c.pins.Store(tool, l)
	return l
}

// Pins returns every tool's Pin, in name order.
func (c *Catalog) Pins() []toolpin.Listed {
	out := make([]toolpin.Listed, len(c.Names))
	for i, name := range c.Names {
		out[i] = c.Pin(name)
	}
	return out
}

// ToolOf is the discovered form of a tool an upstream server listed.
func ToolOf(t *mcp.Tool) mcpsettings.Tool {
	schema, err := json.Marshal(t.InputSchema)
	if err != nil || len(schema) == 0 || schema[0] != '{' {
		schema = json.RawMessage(`{"type":"object"}`)
	}
	tool := mcpsettings.Tool{Name: t.Name, Title: t.Title, Description: t.Description, InputSchema: schema}
	if t.OutputSchema != nil {
		if out, err := json.Marshal(t.OutputSchema); err == nil && len(out) > 0 && out[0] == '{' {
			tool.OutputSchema = out
		}
	}
	if a := t.Annotations; a != nil {
		tool.Annotations = &mcpsettings.ToolAnnotations{Title: a.Title, ReadOnlyHint: a.ReadOnlyHint, DestructiveHint: a.DestructiveHint,
			IdempotentHint: a.IdempotentHint, OpenWorldHint: a.OpenWorldHint}
	}
	return tool
}

// Clean replaces secrets in what the upstream said in a
// discovery (server name and version, protocol version, each tool's name,
// title, description, annotation title, input and output schema) and never in the gateway's own
// field names: laundering the Discovery's JSON form would also rewrite a
// key such as "tools", and a short secret would empty the catalogue.
func Clean(sc *scrub.Scrubber, d *mcpsettings.Discovery) error {
	for _, f := range []*string{&d.ServerName, &d.ServerVersion, &d.ProtocolVersion} {
		*f = sc.Replace(*f)
	}
	for i := range d.Tools {
		t := &d.Tools[i]
		t.Name, t.Title, t.Description = sc.Replace(t.Name), sc.Replace(t.Title), sc.Replace(t.Description)
		if t.Annotations != nil {
			t.Annotations.Title = sc.Replace(t.Annotations.Title)
		}
		schema, err := scrub.Launder(sc, &t.InputSchema) // a schema is upstream JSON throughout, keys included
		if err != nil {
			return err
		}
		t.InputSchema = *schema
		if t.OutputSchema != nil {
			out, err := scrub.Launder(sc, &t.OutputSchema)
			if err != nil {
				return err
			}
			t.OutputSchema = *out
		}
	}
	return nil
}

// Listed returns the catalog of tools, a complete tools/list of an
// upstream session, with secrets replaced (Clean).
func Listed(sc *scrub.Scrubber, tools []*mcp.Tool) (*Catalog, error) {
	d := mcpsettings.Discovery{Tools: make([]mcpsettings.Tool, 0, len(tools))}
	for _, t := range tools {
		d.Tools = append(d.Tools, ToolOf(t))
	}
	if err := Clean(sc, &d); err != nil {
		return nil, err
	}
	return New(d), nil
}

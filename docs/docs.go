// Package docs carries the reference pages of the binaries, so that what
// a command's -h says about a setting is the reference's own row: help
// text and documentation come from one source (envconf.WithReference).
package docs

import _ "embed"

// ControlPlane is control-plane.md, the control plane's reference.
//
//go:embed control-plane.md
var ControlPlane []byte

// Gateway is gateway.md, the gateway's reference.
//
//go:embed gateway.md
var Gateway []byte

package mcpproxy

// UseSDKPaths turns p's fast paths off for the contract test: agent makes
// the SDK's server answer every message of the MCP endpoint, upstream
// makes the SDK's client send every upstream tools/call. Call it before p
// serves.
func UseSDKPaths(p *Proxy, agent, upstream bool) {
	p.endpoint.SDKAgent, p.eng.SDKUpstream = agent, upstream
}

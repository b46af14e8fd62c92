//go:build !unix

package gateway

// lockNonces takes no lock where flock is missing: one gateway per
// DataDir is then the operator's to keep.
func lockNonces(string) (unlock func(), err error) { return func() {}, nil }

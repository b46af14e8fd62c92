package credvault

import "fmt"

// RotationEnforcement is the gateway's GATEWAY_ROTATION_ENFORCEMENT policy
// for connections whose credentials are overdue (Connection.RotationOverdue).
type RotationEnforcement string

// Rotation enforcement policies.
const (
	RotationOff   RotationEnforcement = "off"   // overdue connections are served silently
	RotationWarn  RotationEnforcement = "warn"  // served, with a warning logged
	RotationBlock RotationEnforcement = "block" // refused with 403 ROTATION_REQUIRED
)

// ParseRotationEnforcement parses "off", "warn" or "block"; empty means warn.
func ParseRotationEnforcement(s string) (RotationEnforcement, error) {
	switch RotationEnforcement(s) {
	case "":
		return RotationWarn, nil
	case RotationOff, RotationWarn, RotationBlock:
		return RotationEnforcement(s), nil
	}
	return "", fmt.Errorf("credvault: rotation enforcement %q is not off, warn or block", s)
}

package web

import (
	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/identity/display"
)

// CheckDisplay refuses, with VALIDATION_ERROR, a string an owner will be
// shown (an agent name, a service name, a webhook URL…) that is longer
// than max bytes or holds what package display refuses: controls, U+202E
// and the other characters that hide or reorder text.
func CheckDisplay(field, v string, max int) *apierror.Error {
	if len(v) > max {
		return Validation("%s must be at most %d bytes", field, max)
	}
	if err := display.Check(v); err != nil {
		return Validation("%s %v", field, err)
	}
	return nil
}

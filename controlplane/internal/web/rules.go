package web

import (
	"errors"

	"github.com/idnhq/idn/apierror"
	"github.com/idnhq/idn/errcode"
)

// Rule answers the errors it accepts; ok is false for the others.
type Rule func(err error) (answer *apierror.Error, ok bool)

// When is the rule that answers the errors match accepts with build.
func When(match func(error) bool, build func(error) *apierror.Error) Rule {
	return func(err error) (*apierror.Error, bool) {
		if !match(err) {
			return nil, false
		}
		return build(err), true
	}
}

// Rules is a part's table from its errors to answers; the first matching
// rule wins.
type Rules []Rule

// Answer is err's answer by the first matching rule, or err itself when
// none matches (Kit.Error answers it then).
func (rs Rules) Answer(err error) error {
	for _, r := range rs {
		if ae, ok := r(err); ok {
			return ae
		}
	}
	return err
}

// Is matches errors that are target (errors.Is).
func Is(target error) func(error) bool {
	return func(err error) bool { return errors.Is(err, target) }
}

// Code builds the envelope of code with its default message.
func Code(code errcode.Code) func(error) *apierror.Error {
	return func(error) *apierror.Error { return apierror.Coded(code, "") }
}

// IsType matches errors that are, or wrap, a T.
func IsType[T error](err error) bool { _, ok := errors.AsType[T](err); return ok }

// CodeWait is Code with the Retry-After of a *RetryLater in the error.
func CodeWait(code errcode.Code) func(error) *apierror.Error {
	return func(err error) *apierror.Error {
		e := apierror.Coded(code, "")
		if rl, ok := errors.AsType[*RetryLater](err); ok {
			e = e.WithRetryAfter(rl.Wait)
		}
		return e
	}
}

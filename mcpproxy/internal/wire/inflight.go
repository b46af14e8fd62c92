package wire

import (
	"context"
	"sync"
)

// InFlight is the calls a session's direct path is answering, by request
// id, so that a cancellation finds its call. The zero value is empty.
type InFlight struct {
	mu    sync.Mutex
	calls map[string]context.CancelFunc
}

// Track registers a call's cancel under its id; false when the id is
// already in flight.
func (f *InFlight) Track(id string, cancel context.CancelFunc) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	if _, dup := f.calls[id]; dup {
		return false
	}
	if f.calls == nil {
		f.calls = make(map[string]context.CancelFunc)
	}
	f.calls[id] = cancel
	return true
}

// Untrack forgets the call under id.
func (f *InFlight) Untrack(id string) {
	f.mu.Lock()
	defer f.mu.Unlock()
	delete(f.calls, id)
}

// Cancel cancels the call in flight under id, if any.
func (f *InFlight) Cancel(id string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	cancel, ok := f.calls[id]
	if ok {
		cancel()
	}
	return ok
}

package rounds

import (
	"context"
	"encoding/json"
	"errors"
	"testing"
	"time"
)

// A call that asks twice takes three rounds; each answer reaches the
// question it was given for, and each state is good once.
func TestRounds(t *testing.T) {
	t.Parallel()
	var tb Table
	tb.Wait = time.Minute
	ctx := context.Background()
	out := tb.Start(ctx, "alice", time.Minute, func(ctx context.Context, ask func(context.Context, Question) (json.RawMessage, error)) (any, error) {
		a, err := ask(ctx, Question{Method: "elicitation/create", Params: json.RawMessage(`{"n":1}`)})
		if err != nil {
			return nil, err
		}
		b, err := ask(ctx, Question{Method: "roots/list"})
		if err != nil {
			return nil, err
		}
		return string(a) + string(b), nil
	})
	for i, answer := range []string{`"first"`, `"second"`} {
		if out.Done || len(out.Questions) != 1 {
			t.Fatalf("round %d: %+v, want one question", i, out)
		}
		var id string
		for id = range out.Questions {
		}
		state := out.State
		if _, err := tb.Resume(ctx, "mallory", state, nil); !errors.Is(err, ErrUnknownState) {
			t.Fatalf("another owner's retry: %v, want ErrUnknownState", err)
		}
		var err error
		if out, err = tb.Resume(ctx, "alice", state, map[string]json.RawMessage{id: json.RawMessage(answer)}); err != nil {
			t.Fatal(err)
		}
		if _, err := tb.Resume(ctx, "alice", state, nil); !errors.Is(err, ErrUnknownState) {
			t.Fatalf("a spent state: %v, want ErrUnknownState", err)
		}
	}
	if !out.Done || out.Result != `"first""second"` || out.Err != nil {
		t.Fatalf("last round %+v", out)
	}
	if n := len(tb.byState); n != 0 {
		t.Errorf("%d calls held after the last round", n)
	}
}

// A call whose agent never retries is abandoned after Wait: the
// question's context ends, so the server hears no answer.
func TestRoundsAbandoned(t *testing.T) {
	t.Parallel()
	tb := Table{Wait: time.Millisecond}
	ended := make(chan error, 1)
	out := tb.Start(context.Background(), "alice", time.Minute, func(ctx context.Context, ask func(context.Context, Question) (json.RawMessage, error)) (any, error) {
		_, err := ask(ctx, Question{Method: "elicitation/create"})
		ended <- err
		return nil, err
	})
	if out.Done {
		t.Fatalf("first round %+v, want a question", out)
	}
	if err := <-ended; err == nil {
		t.Fatal("the abandoned question was answered")
	}
	if _, err := tb.Resume(context.Background(), "alice", out.State, nil); !errors.Is(err, ErrUnknownState) {
		t.Fatalf("retry after abandonment: %v, want ErrUnknownState", err)
	}
}

// A retry without an answer to a question tells the server so.
func TestRoundsUnanswered(t *testing.T) {
	t.Parallel()
	tb := Table{Wait: time.Minute}
	out := tb.Start(context.Background(), "alice", time.Minute, func(ctx context.Context, ask func(context.Context, Question) (json.RawMessage, error)) (any, error) {
		_, err := ask(ctx, Question{Method: "elicitation/create"})
		return nil, err
	})
	out, err := tb.Resume(context.Background(), "alice", out.State, map[string]json.RawMessage{})
	if err != nil || !out.Done || !errors.Is(out.Err, ErrNotAnswered) {
		t.Fatalf("Resume = %+v, %v; want the call ended with ErrNotAnswered", out, err)
	}
}

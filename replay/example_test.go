package replay_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idnhq/idn/replay"
)

func ExampleStore_CheckNonce() {
	store, err := replay.New(replay.Config{}) // 256 MiB, about 19 million nonces
	if err != nil {
		panic(err)
	}
	ctx := context.Background()
	// A signature created now stays acceptable for max age + skew.
	until := time.Now().Add(300*time.Second + 30*time.Second)

	fmt.Println(store.CheckNonce(ctx, "alice", "k3J9xq2LmP", until))
	err = store.CheckNonce(ctx, "alice", "k3J9xq2LmP", until)
	fmt.Println(errors.Is(err, replay.ErrReplay))
	// Output:
	// <nil>
	// true
}

// MemoryFor sizes a store for a request rate: each nonce is kept for the
// signature window (max age + skew, plus up to a second).
func ExampleMemoryFor() {
	const rate, window = 10_000, 331 // requests/s, seconds
	budget := replay.MemoryFor(rate * window)
	fmt.Printf("%d MiB\n", budget>>20)
	store, err := replay.New(replay.Config{MaxBytes: budget})
	if err != nil {
		panic(err)
	}
	_ = store
	// Output:
	// 44 MiB
}

package replay_test

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/idnhq/idn/replay"
)

func ExampleStore_CheckNonce() {
	store, err := replay.New(replay.Config{}) // 256 MiB, about 15.9 million nonces
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

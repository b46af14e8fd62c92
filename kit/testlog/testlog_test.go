package testlog_test

import (
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/idnhq/idn/kit/testlog"
)

func TestConcurrentWritersAndReaders(t *testing.T) {
	t.Parallel()
	var logs testlog.Buffer
	logger := slog.New(slog.NewTextHandler(&logs, nil))
	var wg sync.WaitGroup
	for i := range 8 {
		wg.Go(func() {
			for j := range 50 {
				logger.Info("line", "writer", i, "n", j)
				_ = logs.String()
			}
		})
	}
	wg.Wait()
	if string(logs.Bytes()) != logs.String() {
		t.Fatal("Bytes and String differ")
	}
	if n := strings.Count(logs.String(), "\n"); n != 8*50 {
		t.Fatalf("%d lines, want %d", n, 8*50)
	}
}

func TestAwait(t *testing.T) {
	t.Parallel()
	var logs testlog.Buffer
	if logs.Await("ready", 10*time.Millisecond) {
		t.Fatal("Await on an empty buffer reported the line")
	}
	done := make(chan bool)
	go func() { done <- logs.Await("server ready", 10*time.Second) }()
	fmt.Fprint(&logs, "starting\n")
	fmt.Fprint(&logs, "server ")
	fmt.Fprint(&logs, "ready\n")
	if !<-done {
		t.Fatalf("Await missed a line written in parts: %q", logs.String())
	}
	if !logs.Await("starting", 0) {
		t.Fatal("Await with no time left missed a line already written")
	}
}

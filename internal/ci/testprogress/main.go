// Command testprogress turns `go test -json` on its standard input into a
// readable log for CI: one line per package as it finishes (with its time),
// the full output of every failing test, and every 30 seconds the packages
// still running, so a long run is never silent. It exits 1 when any test or
// package failed, or when the input held no test result at all.
//
//	go test -race -json github.com/idnhq/idn/... | go run ./internal/ci/testprogress
package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"io"
	"os"
	"sort"
	"strings"
	"sync"
	"time"
)

// event is one line of test2json output.
type event struct {
	Action  string
	Package string
	Test    string
	Output  string
	Elapsed float64
}

func main() {
	os.Exit(run(os.Stdin, os.Stdout, 30*time.Second))
}

func run(in io.Reader, out io.Writer, every time.Duration) int {
	p := &progress{out: out, start: time.Now(), running: map[string]time.Time{}, output: map[string]*strings.Builder{}}
	stop := make(chan struct{})
	defer close(stop)
	go func() {
		t := time.NewTicker(every)
		defer t.Stop()
		for {
			select {
			case <-stop:
				return
			case <-t.C:
				p.heartbeat()
			}
		}
	}()
	sc := bufio.NewScanner(in)
	sc.Buffer(make([]byte, 64<<10), 16<<20)
	for sc.Scan() {
		var e event
		if err := json.Unmarshal(sc.Bytes(), &e); err != nil {
			// Build errors and other non-JSON lines pass through as they are.
			p.printf("%s\n", sc.Text())
			continue
		}
		p.handle(e)
	}
	return p.summary()
}

type progress struct {
	mu      sync.Mutex
	out     io.Writer
	start   time.Time
	running map[string]time.Time        // package → start
	output  map[string]*strings.Builder // package/test → output so far
	passed  int
	failed  []string
	skipped int
}

func (p *progress) printf(format string, args ...any) {
	fmt.Fprintf(p.out, "[%4.0fs] "+format, append([]any{time.Since(p.start).Seconds()}, args...)...)
}

func (p *progress) handle(e event) {
	p.mu.Lock()
	defer p.mu.Unlock()
	key := e.Package + " " + e.Test
	switch e.Action {
	case "build-output":
		p.printf("%s", e.Output)
	case "start":
		p.running[e.Package] = time.Now()
	case "output":
		b := p.output[key]
		if b == nil {
			b = &strings.Builder{}
			p.output[key] = b
		}
		b.WriteString(e.Output)
	case "pass", "fail", "skip":
		out := p.output[key]
		delete(p.output, key)
		if e.Test != "" {
			if e.Action == "fail" {
				p.printf("--- FAIL %s %s\n%s", e.Package, e.Test, text(out))
			}
			if e.Action == "skip" && strings.Contains(text(out), "SKIP") {
				// A skipped test says why; CI logs keep the reason visible.
				p.printf("--- SKIP %s %s: %s\n", e.Package, e.Test, skipReason(text(out)))
			}
			return
		}
		delete(p.running, e.Package)
		switch e.Action {
		case "pass":
			p.passed++
			p.printf("ok   %s (%.1fs)\n", e.Package, e.Elapsed)
		case "skip":
			p.skipped++
		case "fail":
			p.failed = append(p.failed, e.Package)
			p.printf("FAIL %s (%.1fs)\n%s", e.Package, e.Elapsed, text(out))
		}
	}
}

func (p *progress) heartbeat() {
	p.mu.Lock()
	defer p.mu.Unlock()
	if len(p.running) == 0 {
		p.printf("… building\n")
		return
	}
	names := make([]string, 0, len(p.running))
	for name, since := range p.running {
		names = append(names, fmt.Sprintf("%s (%.0fs)", strings.TrimPrefix(name, "github.com/idnhq/idn/"), time.Since(since).Seconds()))
	}
	sort.Strings(names)
	p.printf("… running: %s\n", strings.Join(names, ", "))
}

func (p *progress) summary() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.printf("%d packages passed, %d failed, %d without tests\n", p.passed, len(p.failed), p.skipped)
	if len(p.failed) > 0 {
		p.printf("failed: %s\n", strings.Join(p.failed, " "))
		return 1
	}
	if p.passed == 0 {
		return 1
	}
	return 0
}

func text(b *strings.Builder) string {
	if b == nil {
		return ""
	}
	return b.String()
}

// skipReason is the last non-empty line a skipped test printed before its
// "--- SKIP" line, which is where t.Skip's message lands.
func skipReason(out string) string {
	var reason string
	for _, line := range strings.Split(out, "\n") {
		line = strings.TrimSpace(line)
		if line == "" || strings.HasPrefix(line, "--- SKIP") || strings.HasPrefix(line, "=== ") {
			continue
		}
		reason = line
	}
	return reason
}

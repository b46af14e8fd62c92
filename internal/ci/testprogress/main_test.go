package main

import (
	"strings"
	"testing"
	"time"
)

func TestRunReportsPackagesFailuresAndSkips(t *testing.T) {
	t.Parallel()
	in := strings.Join([]string{
		`{"Action":"start","Package":"example.com/a"}`,
		`{"Action":"run","Package":"example.com/a","Test":"TestOK"}`,
		`{"Action":"pass","Package":"example.com/a","Test":"TestOK","Elapsed":0.1}`,
		`{"Action":"output","Package":"example.com/a","Test":"TestDB","Output":"    db_test.go:12: no PostgreSQL: set IDN_TEST_POSTGRES_URL\n"}`,
		`{"Action":"output","Package":"example.com/a","Test":"TestDB","Output":"--- SKIP: TestDB (0.00s)\n"}`,
		`{"Action":"skip","Package":"example.com/a","Test":"TestDB"}`,
		`{"Action":"pass","Package":"example.com/a","Elapsed":1.5}`,
		`{"Action":"start","Package":"example.com/b"}`,
		`{"Action":"output","Package":"example.com/b","Test":"TestBad","Output":"    b_test.go:3: want 1, got 2\n"}`,
		`{"Action":"fail","Package":"example.com/b","Test":"TestBad"}`,
		`{"Action":"fail","Package":"example.com/b","Elapsed":0.2}`,
		`# example.com/c`,
	}, "\n")
	var out strings.Builder
	code := run(strings.NewReader(in), &out, time.Hour)
	got := out.String()
	for _, want := range []string{
		"ok   example.com/a (1.5s)",
		"--- SKIP example.com/a TestDB: db_test.go:12: no PostgreSQL: set IDN_TEST_POSTGRES_URL",
		"--- FAIL example.com/b TestBad\n    b_test.go:3: want 1, got 2",
		"FAIL example.com/b (0.2s)",
		"# example.com/c",
		"1 packages passed, 1 failed",
	} {
		if !strings.Contains(got, want) {
			t.Errorf("output lacks %q:\n%s", want, got)
		}
	}
	if code != 1 {
		t.Errorf("exit status %d, want 1", code)
	}
}

func TestRunWithNoResultsFails(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	if code := run(strings.NewReader("# build failed\n"), &out, time.Hour); code != 1 {
		t.Fatalf("exit status %d for a run without results, want 1", code)
	}
}

func TestHeartbeatNamesRunningPackages(t *testing.T) {
	t.Parallel()
	var out strings.Builder
	p := &progress{out: &out, start: time.Now(), running: map[string]time.Time{"github.com/idnhq/idn/proxy": time.Now()}}
	p.heartbeat()
	if !strings.Contains(out.String(), "running: proxy (") {
		t.Fatalf("heartbeat = %q", out.String())
	}
}

package sqlitestore_test

import (
	"bufio"
	"context"
	"database/sql"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"

	"github.com/idnhq/idn/credvault"
	"github.com/idnhq/idn/credvault/sqlitestore"
)

const crashChildEnv = "CREDVAULT_CRASH_CHILD_STORE"

func TestMain(m *testing.M) {
	if path := os.Getenv(crashChildEnv); path != "" {
		crashChild(path)
		os.Exit(0)
	}
	os.Exit(m.Run())
}

// crashChild writes until it is killed, printing one acknowledgement line
// after each committed write.
func crashChild(path string) {
	ctx := context.Background()
	k, _ := credvault.ParseMasterKey("AAECAwQFBgcICQoLDA0ODxAREhMUFRYXGBkaGxwdHh8=")
	st, err := sqlitestore.Open(ctx, path)
	if err != nil {
		fmt.Println("error", err)
		return
	}
	v, err := credvault.New(ctx, credvault.Config{Store: st, MasterKey: k, PollInterval: -1})
	if err != nil {
		fmt.Println("error", err)
		return
	}
	for i := 0; i < 100000; i++ {
		id := fmt.Sprintf("c-%d", i)
		if _, err := v.Create(ctx, httpConn(id), map[string]string{"token": crashSecret(i, 1)}); err != nil {
			fmt.Println("error", err)
			return
		}
		fmt.Println("create", i)
		val := crashSecret(i, 2)
		if _, err := v.Rotate(ctx, id, credvault.Rotation{Secrets: map[string]*string{"token": &val}, Reason: "scheduled"}); err != nil {
			fmt.Println("error", err)
			return
		}
		fmt.Println("rotate", i)
		if _, _, err := v.PutVariable(ctx, fmt.Sprintf("V_%d", i), crashSecret(i, 0), ""); err != nil {
			fmt.Println("error", err)
			return
		}
		fmt.Println("var", i)
	}
}

func crashSecret(i, version int) string { return fmt.Sprintf("secret-%d-v%d", i, version) }

// TestCrashSafety SIGKILLs a process in the middle of writes and rotations,
// then reopens the store: every acknowledged write is there, the file
// passes integrity_check, and each connection holds exactly the secret of
// its recorded version (never a mix of old and new). The kill lands after
// each kind of acknowledgement in turn, so the write in flight is a
// create, a rotation or a variable write.
func TestCrashSafety(t *testing.T) {
	t.Parallel()
	if testing.Short() {
		t.Skip("spawns writer processes")
	}
	for i, after := range []string{"create", "rotate", "var"} {
		t.Run("kill_after_"+after, func(t *testing.T) { crashAndCheck(t, after, 25+7*i) })
	}
}

func crashAndCheck(t *testing.T, killAfter string, acks int) {
	path := filepath.Join(t.TempDir(), sqlitestore.DefaultFileName)
	cmd := exec.Command(os.Args[0], "-test.run=^$")
	cmd.Env = append(os.Environ(), crashChildEnv+"="+path)
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	acked := map[string]map[int]bool{"create": {}, "rotate": {}, "var": {}}
	sc := bufio.NewScanner(out)
	killed := false
	for sc.Scan() {
		op, n, _ := strings.Cut(sc.Text(), " ")
		if op == "error" {
			t.Fatalf("child: %s", sc.Text())
		}
		i, _ := strconv.Atoi(n)
		acked[op][i] = true
		// Kill mid-stream, at a point that is not aligned to an operation boundary.
		if !killed && len(acked["create"]) >= acks && op == killAfter {
			if err := cmd.Process.Signal(syscall.SIGKILL); err != nil {
				t.Fatal(err)
			}
			killed = true
		}
	}
	_ = cmd.Wait()
	if !killed {
		t.Fatal("child exited before being killed")
	}
	t.Logf("acknowledged: %d creates, %d rotations, %d variables", len(acked["create"]), len(acked["rotate"]), len(acked["var"]))

	db, err := sql.Open("sqlite", path)
	if err != nil {
		t.Fatal(err)
	}
	var integrity string
	if err := db.QueryRow("PRAGMA integrity_check").Scan(&integrity); err != nil || integrity != "ok" {
		t.Fatalf("integrity_check = %q, %v", integrity, err)
	}
	db.Close()

	v := openVault(t, path, -1)
	for i := range acked["create"] {
		id := fmt.Sprintf("c-%d", i)
		r, ok := v.Lookup(id)
		if !ok {
			t.Fatalf("acknowledged create of %s lost", id)
		}
		ver := r.Connection.SecretVersion
		if acked["rotate"][i] && ver != 2 {
			t.Fatalf("acknowledged rotation of %s lost (version %d)", id, ver)
		}
		if s, err := r.Secret(); err != nil || s != crashSecret(i, int(ver)) {
			t.Fatalf("%s version %d holds %q, %v", id, ver, s, err)
		}
	}
	vars := map[string]bool{}
	for _, vr := range v.Variables() {
		vars[vr.Key] = true
	}
	for i := range acked["var"] {
		if !vars[fmt.Sprintf("V_%d", i)] {
			t.Fatalf("acknowledged variable V_%d lost", i)
		}
	}
}

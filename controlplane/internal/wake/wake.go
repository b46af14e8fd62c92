// Package wake holds requests that wait for the next change of a key
// (the claims feed's long poll waits per service) and wakes them when it
// commits, in process or, on PostgreSQL, from any instance through one
// LISTEN connection per instance.
package wake

import (
	"context"
	"database/sql/driver"
	"errors"
	"log/slog"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/idnhq/idn/controlplane/internal/sqldb"
)

// listenLinger keeps the LISTEN connection open that long after the
// last wait ended, for the gateways' next one.
const listenLinger = 30 * time.Second

// Waits wakes the requests waiting for the next change of a key (a
// service, for the claims feed). A change made through this instance
// wakes them in process (Wake); on PostgreSQL every committed change is
// also announced on the Waits' channel (for the feed, a trigger on its
// change log), and one LISTEN connection per instance, shared by all its
// waits, wakes them whichever instance made it. The connection is open only while a wait runs (and
// listenLinger after). When it is lost, notifications may have been
// missed: every wait is woken to read the log again, and no wait starts
// until it listens again.
type Waits struct {
	db      *sqldb.DB
	channel string
	log     *slog.Logger
	perKey  int
	max     int

	mu      sync.Mutex
	signals map[string]chan struct{} // key → closed at its next change
	waits   map[string]int           // key → waits on this instance
	total   int
	ended   bool
	listen  *listener
	linger  *time.Timer

	// Blocked, when set (tests), is called each time a wait has read what
	// it waits for, found nothing, and is about to block.
	Blocked func(key string)
}

// New returns the waits of db, announced on channel on PostgreSQL: at most
// perKey waits of one key and max in all on this instance.
func New(db *sqldb.DB, channel string, perKey, max int, log *slog.Logger) *Waits {
	return &Waits{db: db, channel: channel, log: log, perKey: perKey, max: max, signals: map[string]chan struct{}{}, waits: map[string]int{}}
}

// ErrFull: the instance holds as many waits as it allows, for the key or
// in all.
var ErrFull = errors.New("controlplane: waits full")

// Wait is one request's wait for changes of its key.
type Wait struct {
	w    *Waits
	key  string
	once sync.Once
}

// Start registers a wait for key's changes. On PostgreSQL it returns
// once this instance listens, so no change committed after the caller
// reads the log can go unannounced.
func (w *Waits) Start(ctx context.Context, key string) (*Wait, error) {
	w.mu.Lock()
	if w.ended || w.waits[key] >= w.perKey || w.total >= w.max {
		w.mu.Unlock()
		return nil, ErrFull
	}
	w.waits[key]++
	w.total++
	var l *listener
	if w.db.PG() {
		if w.linger != nil {
			w.linger.Stop()
			w.linger = nil
		}
		if w.listen == nil {
			w.listen = w.startListener()
		}
		l = w.listen
	}
	w.mu.Unlock()
	fw := &Wait{w: w, key: key}
	if l == nil {
		return fw, nil
	}
	select {
	case <-l.ready:
		return fw, nil
	case <-ctx.Done():
		fw.End()
		return nil, ctx.Err()
	}
}

// Signal returns a channel closed at the next change of the wait's
// key, or when the waits end. Take it before reading what the wait is
// for: a change that commits after the read closes it.
func (fw *Wait) Signal() <-chan struct{} {
	w := fw.w
	w.mu.Lock()
	defer w.mu.Unlock()
	ch := w.signals[fw.key]
	if ch == nil {
		ch = make(chan struct{})
		if w.ended {
			close(ch)
		} else {
			w.signals[fw.key] = ch
		}
	}
	return ch
}

// End gives the wait's place back.
func (fw *Wait) End() {
	fw.once.Do(func() {
		w := fw.w
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.waits[fw.key]--; w.waits[fw.key] == 0 {
			delete(w.waits, fw.key)
			delete(w.signals, fw.key) // nobody holds it any more
		}
		w.total--
		if w.total > 0 || w.listen == nil {
			return
		}
		l := w.listen
		w.linger = time.AfterFunc(listenLinger, func() {
			w.mu.Lock()
			if w.total > 0 || w.listen != l {
				w.mu.Unlock()
				return
			}
			w.listen, w.linger = nil, nil
			w.mu.Unlock()
			l.stop()
			<-l.done
		})
	})
}

// Wake wakes the waits of key.
func (w *Waits) Wake(key string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ch := w.signals[key]; ch != nil {
		close(ch)
		delete(w.signals, key)
	}
}

// wakeAll wakes every wait, to read the log again.
func (w *Waits) wakeAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for key, ch := range w.signals {
		close(ch)
		delete(w.signals, key)
	}
}

// End wakes every wait for good: each answers what it has, and no wait
// starts from now on. It stops the LISTEN connection.
func (w *Waits) End() {
	w.mu.Lock()
	w.ended = true
	for key, ch := range w.signals {
		close(ch)
		delete(w.signals, key)
	}
	l := w.listen
	w.listen = nil
	if w.linger != nil {
		w.linger.Stop()
		w.linger = nil
	}
	w.mu.Unlock()
	if l != nil {
		l.stop()
		<-l.done
	}
}

// listener is the goroutine that holds LISTEN on the channel.
type listener struct {
	ready chan struct{} // closed once LISTEN ran
	stop  context.CancelFunc
	done  chan struct{}
}

// startListener starts the LISTEN goroutine. It reconnects (after a
// second) when its connection fails, until stopped.
func (w *Waits) startListener() *listener {
	ctx, cancel := context.WithCancel(context.Background())
	l := &listener{ready: make(chan struct{}), stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		var readyOnce sync.Once
		for ctx.Err() == nil {
			err := w.listenOnce(ctx, func() { readyOnce.Do(func() { close(l.ready) }) })
			if ctx.Err() != nil {
				return
			}
			w.log.Warn("waits: LISTEN connection failed; reconnecting", "channel", w.channel, "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
		}
	}()
	return l
}

// listenOnce holds one connection in LISTEN and wakes the waits of every
// key announced, until ctx ends or the connection fails.
func (w *Waits) listenOnce(ctx context.Context, ready func()) error {
	conn, err := w.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		pc := dc.(*stdlib.Conn).Conn()
		if _, err := pc.Exec(ctx, `LISTEN `+w.channel); err != nil {
			return err
		}
		// What was announced while no connection listened is unknown:
		// every wait reads the log again.
		w.wakeAll()
		ready()
		for {
			n, err := pc.WaitForNotification(ctx)
			if err != nil {
				// The connection is left in LISTEN: discard it rather
				// than hand it back to the pool.
				return errors.Join(err, driver.ErrBadConn)
			}
			w.Wake(n.Payload)
		}
	})
}

// Ended reports whether End was called.
func (w *Waits) Ended() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ended
}

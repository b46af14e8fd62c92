package claims

import (
	"context"
	"database/sql/driver"
	"errors"
	"log/slog"
	"net/url"
	"strconv"
	"sync"
	"time"

	"github.com/jackc/pgx/v5/stdlib"

	"github.com/idnhq/idn/controlplane/internal/sqldb"
	"github.com/idnhq/idn/controlplane/internal/web"
	"github.com/idnhq/idn/internal/apierror"
	"github.com/idnhq/idn/internal/feedwire"
)

// Bounds of the feed's long poll (GET /v1/namespaces/claims?since=…&wait=…).
// A wait holds a goroutine and a client connection, never a database
// connection: the change log is read when the wait starts and again at
// each wake. Past MaxFeedWaitsPerService waits of one service on one
// instance, or MaxFeedWaits in all, a request is answered at once, as
// without wait, and the gateway polls: a service's share keeps one
// service (or a stolen key of it) from taking every wait.
const (
	MaxFeedWait            = 30 * time.Second
	MaxFeedWaitsPerService = 256
	MaxFeedWaits           = 4096
)

// feedListenLinger keeps the LISTEN connection open that long after the
// last wait ended, for the gateways' next one.
const feedListenLinger = 30 * time.Second

// feedWaits wakes the feed requests waiting for the next change of a
// service. A change made through this instance wakes them in process
// (Core.publish); on PostgreSQL every committed change is also announced
// on sqldb.FeedChannel (a trigger on the change log), and one LISTEN
// connection per instance, shared by all its waits, wakes them whichever
// instance made it. The connection is open only while a wait runs (and
// feedListenLinger after). When it is lost, notifications may have been
// missed: every wait is woken to read the log again, and no wait starts
// until it listens again.
type feedWaits struct {
	db  *sqldb.DB
	log *slog.Logger

	mu      sync.Mutex
	signals map[string]chan struct{} // service → closed at its next change
	waits   map[string]int           // service → waits on this instance
	total   int
	ended   bool
	listen  *feedListener
	linger  *time.Timer

	// blocked, when set (tests), is called each time a wait has read the
	// log, found nothing, and is about to block.
	blocked func(service string)
}

func newFeedWaits(db *sqldb.DB, log *slog.Logger) *feedWaits {
	return &feedWaits{db: db, log: log, signals: map[string]chan struct{}{}, waits: map[string]int{}}
}

// errFeedWaitsFull: the instance holds as many waits as it allows, for the
// service or in all.
var errFeedWaitsFull = errors.New("controlplane: feed waits full")

// feedWait is one request's wait for changes of its service.
type feedWait struct {
	w       *feedWaits
	service string
	once    sync.Once
}

// start registers a wait for service's changes. On PostgreSQL it returns
// once this instance listens, so no change committed after the caller
// reads the log can go unannounced.
func (w *feedWaits) start(ctx context.Context, service string) (*feedWait, error) {
	w.mu.Lock()
	if w.ended || w.waits[service] >= MaxFeedWaitsPerService || w.total >= MaxFeedWaits {
		w.mu.Unlock()
		return nil, errFeedWaitsFull
	}
	w.waits[service]++
	w.total++
	var l *feedListener
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
	fw := &feedWait{w: w, service: service}
	if l == nil {
		return fw, nil
	}
	select {
	case <-l.ready:
		return fw, nil
	case <-ctx.Done():
		fw.end()
		return nil, ctx.Err()
	}
}

// signal returns a channel closed at the next change of the wait's
// service, or when the waits end. Take it before reading the log: a change
// that commits after the read closes it.
func (fw *feedWait) signal() <-chan struct{} {
	w := fw.w
	w.mu.Lock()
	defer w.mu.Unlock()
	ch := w.signals[fw.service]
	if ch == nil {
		ch = make(chan struct{})
		if w.ended {
			close(ch)
		} else {
			w.signals[fw.service] = ch
		}
	}
	return ch
}

// end gives the wait's place back.
func (fw *feedWait) end() {
	fw.once.Do(func() {
		w := fw.w
		w.mu.Lock()
		defer w.mu.Unlock()
		if w.waits[fw.service]--; w.waits[fw.service] == 0 {
			delete(w.waits, fw.service)
			delete(w.signals, fw.service) // nobody holds it any more
		}
		w.total--
		if w.total > 0 || w.listen == nil {
			return
		}
		l := w.listen
		w.linger = time.AfterFunc(feedListenLinger, func() {
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

// wake wakes the waits of service.
func (w *feedWaits) wake(service string) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if ch := w.signals[service]; ch != nil {
		close(ch)
		delete(w.signals, service)
	}
}

// wakeAll wakes every wait, to read the log again.
func (w *feedWaits) wakeAll() {
	w.mu.Lock()
	defer w.mu.Unlock()
	for service, ch := range w.signals {
		close(ch)
		delete(w.signals, service)
	}
}

// end wakes every wait for good: each answers what it has, and no wait
// starts from now on. It stops the LISTEN connection.
func (w *feedWaits) end() {
	w.mu.Lock()
	w.ended = true
	for service, ch := range w.signals {
		close(ch)
		delete(w.signals, service)
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

// feedListener is the goroutine that holds LISTEN on sqldb.FeedChannel.
type feedListener struct {
	ready chan struct{} // closed once LISTEN ran
	stop  context.CancelFunc
	done  chan struct{}
}

// startListener starts the LISTEN goroutine. It reconnects (after a
// second) when its connection fails, until stopped.
func (w *feedWaits) startListener() *feedListener {
	ctx, cancel := context.WithCancel(context.Background())
	l := &feedListener{ready: make(chan struct{}), stop: cancel, done: make(chan struct{})}
	go func() {
		defer close(l.done)
		var readyOnce sync.Once
		for ctx.Err() == nil {
			err := w.listenOnce(ctx, func() { readyOnce.Do(func() { close(l.ready) }) })
			if ctx.Err() != nil {
				return
			}
			w.log.Warn("feed waits: LISTEN connection failed; reconnecting", "err", err)
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
// service announced, until ctx ends or the connection fails.
func (w *feedWaits) listenOnce(ctx context.Context, ready func()) error {
	conn, err := w.db.Conn(ctx)
	if err != nil {
		return err
	}
	defer conn.Close()
	return conn.Raw(func(dc any) error {
		pc := dc.(*stdlib.Conn).Conn()
		if _, err := pc.Exec(ctx, `LISTEN `+sqldb.FeedChannel); err != nil {
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
			w.wake(n.Payload)
		}
	})
}

// waitParam reads ?wait=: whole seconds from 0 (no wait) to MaxFeedWait.
func waitParam(q url.Values) (time.Duration, *apierror.Error) {
	if !q.Has(feedwire.WaitQuery) {
		return 0, nil
	}
	n, err := strconv.Atoi(q.Get(feedwire.WaitQuery))
	if err != nil || n < 0 || time.Duration(n)*time.Second > MaxFeedWait {
		return 0, web.Validation("wait must be whole seconds from 0 to %d", int(MaxFeedWait/time.Second))
	}
	return time.Duration(n) * time.Second, nil
}

// waitChanges is feedChanges that, when no change follows since, waits up
// to wait for one to commit and reads the log again at each wake. It
// answers no change when the wait ends, when the waits end (Core.EndWaits)
// and at once when the instance holds as many waits as it allows.
func (s *Core) waitChanges(ctx context.Context, slug string, since int64, limit int, wait time.Duration) ([]feedChange, bool, error) {
	if wait <= 0 {
		return s.store.feedChanges(ctx, slug, since, limit)
	}
	// A LISTEN connection that cannot be had within the wait (the
	// database refuses it) leaves the request a plain read.
	sctx, cancel := context.WithTimeout(ctx, wait)
	fw, err := s.waits.start(sctx, slug)
	cancel()
	if errors.Is(err, errFeedWaitsFull) || errors.Is(err, context.DeadlineExceeded) && ctx.Err() == nil {
		return s.store.feedChanges(ctx, slug, since, limit)
	}
	if err != nil {
		return nil, false, err
	}
	defer fw.end()
	timer := time.NewTimer(wait)
	defer timer.Stop()
	for {
		changed := fw.signal()
		changes, more, err := s.store.feedChanges(ctx, slug, since, limit)
		if err != nil || len(changes) > 0 {
			return changes, more, err
		}
		if s.waits.blocked != nil {
			s.waits.blocked(slug)
		}
		select {
		case <-changed:
			if s.waits.isEnded() {
				return s.store.feedChanges(ctx, slug, since, limit)
			}
		case <-timer.C:
			return nil, false, nil
		case <-ctx.Done():
			return nil, false, ctx.Err()
		}
	}
}

// isEnded reports whether end was called.
func (w *feedWaits) isEnded() bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	return w.ended
}

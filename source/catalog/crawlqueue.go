package catalog

import (
	"context"
	"sync"

	"github.com/planetlabs/go-stac/crawler"
)

// crawlQueue runs a crawl's tasks on at most limit goroutines at once.
//
// It stands in for go-stac's in-memory queue, which hands queued tasks to
// workers only from a worker that still holds its own slot: when every
// slot is taken as the last workers finish (always so with GOMAXPROCS=1)
// the queued tasks never run and the crawl ends early, silently missing
// items. Here a finishing task frees its slot before starting the next.
type crawlQueue struct {
	ctx     context.Context
	limit   int
	handler crawler.Handler

	mu      sync.Mutex
	pending []*crawler.Task
	running int
	err     error
	done    chan struct{} // closed once nothing runs and nothing more will
	closed  bool
}

var _ crawler.Queue = (*crawlQueue)(nil)

func newCrawlQueue(ctx context.Context, limit int) *crawlQueue {
	return &crawlQueue{ctx: ctx, limit: max(limit, 1), done: make(chan struct{})}
}

// Handle sets the function that runs a task; the crawler calls it before
// adding any task.
func (q *crawlQueue) Handle(h crawler.Handler) { q.handler = h }

// Add queues tasks and starts as many as the limit allows.
func (q *crawlQueue) Add(tasks []*crawler.Task) error {
	q.mu.Lock()
	defer q.mu.Unlock()
	q.pending = append(q.pending, tasks...)
	q.startLocked()
	return nil
}

// Wait returns once every task has run, or once one has failed and those
// running have finished, with the first error.
func (q *crawlQueue) Wait() error {
	<-q.done
	q.mu.Lock()
	defer q.mu.Unlock()
	return q.err
}

// startLocked starts pending tasks while slots are free, and ends the crawl
// when none is left; q.mu is held. The crawler adds the root task before it
// waits, so the crawl cannot end before it starts.
func (q *crawlQueue) startLocked() {
	if q.err == nil && q.ctx.Err() != nil {
		q.err = q.ctx.Err()
	}
	for q.err == nil && q.running < q.limit && len(q.pending) > 0 {
		t := q.pending[0]
		q.pending[0] = nil // let the task be collected once run
		q.pending = q.pending[1:]
		q.running++
		go q.run(t)
	}
	if q.running == 0 && (len(q.pending) == 0 || q.err != nil) && !q.closed {
		// Only a running task can add more, so none will come: the crawl
		// is over. Tasks left pending after an error are dropped.
		q.pending = nil
		q.closed = true
		close(q.done)
	}
}

func (q *crawlQueue) run(t *crawler.Task) {
	// The handler adds the tasks it finds through Add, so q.mu must not be
	// held while it runs.
	err := q.handler(t)
	q.mu.Lock()
	defer q.mu.Unlock()
	q.running--
	if err != nil && q.err == nil {
		q.err = err
	}
	q.startLocked()
}

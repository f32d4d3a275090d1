package delay

import (
	"container/heap"
	"sync"
	"time"

	"github.com/orderjob/executor/internal/rabbit"
)

// heldMsg is a message this process holds unacknowledged: due within a
// second and waiting in the heap, or popped and being claimed and run.
type heldMsg struct {
	id     int64
	due    time.Time // the task's due time it carries (database clock)
	wakeAt time.Time // when pop hands it out: due, or a little later while its id is busy
	resend bool      // its hop was not confirmed: send it on again at wakeAt
	entry  timerEntry
	d      rabbit.Delivery
	index  int // in the heap; -1 when popped
}

// heldSet is the in-process timer of the last second: a heap of held
// messages by wakeAt, and the popped ones by task id (at most one per id:
// a second message of an id in use waits in the heap until the first is
// done, so done always acknowledges the message the claim came from).
type heldSet struct {
	mu   sync.Mutex
	q    heldHeap
	out  map[int64]*heldMsg
	dead uint64 // deliveries of this generation or older came on a closed channel
}

func (s *heldSet) init() { s.out = map[int64]*heldMsg{} }

func (s *heldSet) len() int {
	s.mu.Lock()
	defer s.mu.Unlock()
	return len(s.q) + len(s.out)
}

// push holds m in the heap until its wakeAt: a message just received, one
// popped and scheduled again, or one whose hop failed. A duplicate (two
// messages of one task and time) is not looked for here: the second waits
// while the first is in use, then the claim finds the task taken.
func (s *heldSet) push(m *heldMsg) {
	s.mu.Lock()
	defer s.mu.Unlock()
	heap.Push(&s.q, m)
}

// busyWait is how long a message of a task in use waits before pop looks
// at it again.
const busyWait = 250 * time.Millisecond

// pop takes up to n messages whose wakeAt has come, for the dispatcher
// (ids) or to be sent on again (resend); next is the earliest wakeAt left.
func (s *heldSet) pop(now time.Time, n int) (ids []int64, resend []*heldMsg, next time.Time) {
	s.mu.Lock()
	defer s.mu.Unlock()
	var busy []*heldMsg
	for len(s.q) > 0 && !s.q[0].wakeAt.After(now) && len(ids) < n {
		m := heap.Pop(&s.q).(*heldMsg)
		switch {
		case m.d.Gen <= s.dead:
			// Its channel closed: the broker delivers it again.
		case m.resend:
			resend = append(resend, m)
		case s.out[m.id] != nil:
			m.wakeAt = now.Add(busyWait)
			busy = append(busy, m)
		default:
			s.out[m.id] = m
			ids = append(ids, m.id)
		}
	}
	for _, m := range busy {
		heap.Push(&s.q, m)
	}
	if len(s.q) > 0 {
		next = s.q[0].wakeAt
	}
	return ids, resend, next
}

// take removes and returns the popped message of id.
func (s *heldSet) take(id int64) (*heldMsg, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.out[id]
	delete(s.out, id)
	return m, ok
}

// takeAlive is take for a message whose channel is still open.
func (s *heldSet) takeAlive(id int64) (*heldMsg, bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	m, ok := s.out[id]
	if !ok || m.d.Gen <= s.dead {
		return nil, false
	}
	delete(s.out, id)
	return m, true
}

// putOut puts back a message takeAlive took (its move failed).
func (s *heldSet) putOut(m *heldMsg) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.out[m.id] = m
}

// lost drops the waiting messages of channel generation gen and older; the
// broker delivers them again.
func (s *heldSet) lost(gen uint64) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.dead = max(s.dead, gen)
	keep := s.q[:0]
	for _, m := range s.q {
		if m.d.Gen > s.dead {
			keep = append(keep, m)
		}
	}
	for i := len(keep); i < len(s.q); i++ {
		s.q[i] = nil
	}
	s.q = keep
	for i, m := range s.q {
		m.index = i
	}
	heap.Init(&s.q)
}

// clear drops everything (the consumer stopped: the broker has it all).
func (s *heldSet) clear() {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.q = nil
	s.out = map[int64]*heldMsg{}
}

// overdue is how long the earliest waiting message has been due (0 if none
// is), a sign that the dispatcher is behind.
func (s *heldSet) overdue(now time.Time) time.Duration {
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.q) == 0 {
		return 0
	}
	return max(now.Sub(s.q[0].wakeAt), 0)
}

// heldHeap orders held messages by wakeAt (container/heap).
type heldHeap []*heldMsg

func (h heldHeap) Len() int           { return len(h) }
func (h heldHeap) Less(i, j int) bool { return h[i].wakeAt.Before(h[j].wakeAt) }
func (h heldHeap) Swap(i, j int) {
	h[i], h[j] = h[j], h[i]
	h[i].index, h[j].index = i, j
}
func (h *heldHeap) Push(x any) {
	m := x.(*heldMsg)
	m.index = len(*h)
	*h = append(*h, m)
}
func (h *heldHeap) Pop() any {
	old := *h
	m := old[len(old)-1]
	old[len(old)-1] = nil
	m.index = -1
	*h = old[:len(old)-1]
	return m
}

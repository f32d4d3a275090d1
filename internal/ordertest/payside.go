package ordertest

import (
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"sync"
	"testing"
	"time"
)

// PaySide is an httptest payment side of the close-trade contract
// (payment.HTTPTradeCloser) that answers each order as told:
// "closed", "already_paid", "not_found" (the contract's answers), "flaky"
// (503 once, then closed), "fail" (always 500), "slow" (answers after the
// caller gave up), "garbage" (200 with a body outside the contract), "404".
// Orders without an answer get "closed".
type PaySide struct {
	srv   *httptest.Server
	token string // expected in X-Payment-Token

	mu        sync.Mutex
	answers   map[string]string
	calls     map[string]int
	badToken  int
	inFlight  int
	maxFlight int
}

// NewPaySide starts a payment side expecting token, stopped when t ends.
func NewPaySide(t testing.TB, token string) *PaySide {
	t.Helper()
	p := &PaySide{token: token, answers: map[string]string{}, calls: map[string]int{}}
	p.srv = httptest.NewServer(http.HandlerFunc(p.serve))
	t.Cleanup(p.srv.Close)
	return p
}

// Set tells the payment side how to answer order no.
func (p *PaySide) Set(no, answer string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.answers[no] = answer
}

// Counters returns the calls with a wrong token and the most calls in flight
// at once.
func (p *PaySide) Counters() (badToken, maxFlight int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.badToken, p.maxFlight
}

// CallsOf counts the calls for order no.
func (p *PaySide) CallsOf(no string) int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.calls[no]
}

// URL is where the payment side takes close-trade calls.
func (p *PaySide) URL() string { return p.srv.URL + "/trade/close" }

// Token is the token the payment side expects.
func (p *PaySide) Token() string { return p.token }

// Client is a client for the payment side.
func (p *PaySide) Client() *http.Client { return p.srv.Client() }

func (p *PaySide) serve(w http.ResponseWriter, r *http.Request) {
	var req struct {
		OrderNo string `json:"orderNo"`
	}
	if r.Method != http.MethodPost || r.Header.Get("Content-Type") != "application/json" ||
		json.NewDecoder(r.Body).Decode(&req) != nil || req.OrderNo == "" {
		http.Error(w, "bad request", http.StatusBadRequest)
		return
	}
	p.mu.Lock()
	if r.Header.Get("X-Payment-Token") != p.token {
		p.badToken++
	}
	p.calls[req.OrderNo]++
	n := p.calls[req.OrderNo]
	answer := p.answers[req.OrderNo]
	p.inFlight++
	p.maxFlight = max(p.maxFlight, p.inFlight)
	p.mu.Unlock()
	defer func() {
		p.mu.Lock()
		p.inFlight--
		p.mu.Unlock()
	}()
	time.Sleep(time.Millisecond) // let calls overlap, to measure the fan-out

	result := func(res string) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]string{"result": res})
	}
	switch answer {
	case "", "closed":
		result("closed")
	case "already_paid", "not_found":
		result(answer)
	case "flaky":
		if n == 1 {
			http.Error(w, "busy", http.StatusServiceUnavailable)
			return
		}
		result("closed")
	case "fail":
		http.Error(w, "boom", http.StatusInternalServerError)
	case "slow":
		select {
		case <-r.Context().Done():
		case <-time.After(5 * time.Second):
		}
	case "garbage":
		result("maybe")
	case "404":
		http.NotFound(w, r)
	}
}

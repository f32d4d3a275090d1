package main

import (
	"bytes"
	"context"
	"io"
	"strings"
	"testing"
	"time"

	"github.com/stretchr/testify/require"

	"github.com/orderjob/executor/internal/dbtest"
	"github.com/orderjob/executor/internal/redistest"
)

func TestParseDelayRates(t *testing.T) {
	for _, tc := range []struct {
		args  []string
		rates []int
		sweep bool
		old   bool
		err   string
	}{
		{args: nil, rates: []int{1000}},
		{args: []string{"-rate", "2500"}, rates: []int{2500}},
		{args: []string{"-rates", "1000,5000,10000,20000"}, rates: []int{1000, 5000, 10000, 20000}, sweep: true},
		{args: []string{"-rates", " 1000 , 5000"}, rates: []int{1000, 5000}, sweep: true},
		{args: []string{"-rates", "7"}, rates: []int{7}, sweep: true},
		{args: []string{"-rates", "5000,1000"}, rates: []int{5000, 1000}, sweep: true},
		{args: []string{"-rates", ""}, err: "-rates: is empty: want comma-separated rates, such as 1000,5000,10000,20000"},
		{args: []string{"-rates", " "}, err: "-rates: is empty: want comma-separated rates, such as 1000,5000,10000,20000"},
		{args: []string{"-rates", "1000,,5000"}, err: "-rates: item 2 of 3 is empty"},
		{args: []string{"-rates", "1000,"}, err: "-rates: item 2 of 2 is empty"},
		{args: []string{"-rates", ",1000"}, err: "-rates: item 1 of 2 is empty"},
		{args: []string{"-rates", "1000,5k"}, err: `-rates: item 2, "5k", is not a whole number of tasks per second`},
		{args: []string{"-rates", "1000,2.5"}, err: `-rates: item 2, "2.5", is not a whole number of tasks per second`},
		{args: []string{"-rates", "0,1000"}, err: "-rates: item 1, 0, is not a positive rate"},
		{args: []string{"-rates", "1000,-5"}, err: "-rates: item 2, -5, is not a positive rate"},
		{args: []string{"-rates", "1000,5000,1000"}, err: "-rates: item 3, 1000, repeats item 1"},
		{args: []string{"-rates", "1000,01000"}, err: "-rates: item 2, 1000, repeats item 1"},
		{args: []string{"-rate", "1000", "-rates", "1000,5000"}, err: "-rate and -rates: give one (-rates runs each of its rates in turn)"},
		{args: []string{"-rate", "0"}, err: "-rate, -duration, -executors, -workers and -register-rate must be positive"},
		{args: []string{"-rates", "1000", "-register-rate", "0"}, err: "-rate, -duration, -executors, -workers and -register-rate must be positive"},
		{args: []string{"-rates", "1000", "-duration", "0s"}, err: "-rate, -duration, -executors, -workers and -register-rate must be positive"},
		{args: []string{"-old-task-indexes"}, rates: []int{1000}, old: true},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			o, err := parseDelayFlags(tc.args, io.Discard)
			if tc.err != "" {
				require.EqualError(t, err, tc.err)
				return
			}
			require.NoError(t, err)
			require.Equal(t, tc.rates, o.rates)
			require.Equal(t, tc.sweep, o.sweep)
			require.Equal(t, tc.old, o.oldTaskIndexes)
		})
	}
}

// A small sweep over the real close prints each rate's figures with its
// line, then the table with a row per rate in the order given; -rate alone
// keeps its last line.
func TestBenchDelaySweepSmall(t *testing.T) {
	if testing.Short() {
		t.Skip("runs the bench against MariaDB and Redis")
	}
	common := []string{"-duration", "1s", "-lead", "500ms", "-mysql", dbtest.ServerDSN(), "-redis", redistest.Addr()}
	var out, errOut bytes.Buffer
	err := runDelayBench(context.Background(), append([]string{"-rates", "300,100"}, common...), &out, &errOut)
	require.NoError(t, err, errOut.String())
	s := out.String()
	t.Log(s)
	require.Regexp(t, `(?m)^== sweep 1 of 2: 300 tasks/s for 1s$`, s)
	require.Regexp(t, `(?m)^sweep rate=300 p50_ms=\d+ p99_ms=\d+ p999_ms=\d+ achieved/s=\d+ lost=0 dup=0 load=\S+ \S+ \S+$`, s)
	require.Regexp(t, `(?m)^sweep rate=100 p50_ms=\d+ p99_ms=\d+ p999_ms=\d+ achieved/s=\d+ lost=0 dup=0 load=\S+ \S+ \S+$`, s)
	require.Contains(t, s, "sweep: 2 dispatcher(s) x 8 workers, handler orderTimeoutClose (batch), timer redis, 1s at each rate")
	table := s[strings.Index(s, "\nsweep: "):]
	require.Regexp(t, `(?s)rate/s\s+achieved/s\s+p50_ms\s+p99_ms\s+p999_ms\s+lost\s+dup\s+kept_up.*\n\s+300\s+\d+\s+\d+\s+\d+\s+\d+\s+0\s+0\s+(yes|no|backlog)\s+\S+ \S+ \S+ -> \S+ \S+ \S+\n\s+100\s+\d+`, table)

	out.Reset()
	err = runDelayBench(context.Background(), append([]string{"-rate", "100"}, common...), &out, &errOut)
	require.NoError(t, err, errOut.String())
	lines := strings.Split(strings.TrimSpace(out.String()), "\n")
	require.Regexp(t, `^p50_ms=\d+ p99_ms=\d+ p999_ms=\d+ lost=0 dup=0$`, lines[len(lines)-1], "the last line keeps its form")
	require.NotContains(t, out.String(), "sweep")
}

// -steady registers during the run, 30 s ahead unless -lead says otherwise.
func TestParseDelaySteady(t *testing.T) {
	for _, tc := range []struct {
		args   []string
		during bool
		lead   time.Duration
	}{
		{args: nil, lead: 5 * time.Second},
		{args: []string{"-register-during"}, during: true, lead: 5 * time.Second},
		{args: []string{"-steady"}, during: true, lead: 30 * time.Second},
		{args: []string{"-steady", "-lead", "10s"}, during: true, lead: 10 * time.Second},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			o, err := parseDelayFlags(tc.args, io.Discard)
			require.NoError(t, err)
			require.Equal(t, tc.during, o.during)
			require.Equal(t, tc.lead, o.lead)
		})
	}
}

package handlers

import (
	"strings"
	"testing"
	"unicode/utf8"

	"github.com/stretchr/testify/require"
)

func TestCloseOptions(t *testing.T) {
	t.Parallel()
	for _, tc := range []struct {
		param   string
		wantErr string
	}{
		{param: ""},
		{param: "pageSize=200, maxOrders=1000,maxPerSecond=50.5,dryRun=true"},
		{param: `{"pageSize": 200, "dryRun": true, "maxPerSecond": "10"}`},
		{param: "pageSize=0", wantErr: "pageSize=\"0\": want a whole number from 1 to 5000"},
		{param: "pageSize=abc", wantErr: "want a whole number"},
		{param: "dryRun=maybe", wantErr: "dryRun=\"maybe\": want true or false"},
		{param: "maxPerSecond=-1", wantErr: "maxPerSecond"},
		{param: "maxPerSecond=NaN", wantErr: "maxPerSecond"},
		{param: "pagesize=10", wantErr: "unknown job param key(s) pagesize; allowed: pageSize, maxOrders, maxPerSecond, dryRun"},
		{param: "pageSize", wantErr: "expected key=value pairs"},
		{param: "pageSize=1,pageSize=2", wantErr: "given twice"},
		{param: `{"pageSize": [1]}`, wantErr: "must be a string, number or boolean"},
		{param: `{"pageSize": 1} x`, wantErr: "text after the JSON object"},
		{param: `{"pageSize": `, wantErr: "does not parse"},
		{param: "x=1'; DROP TABLE order_info; --", wantErr: "unknown job param key(s) x"},
		{param: strings.Repeat("a", MaxParamBytes+1), wantErr: "limit"},
	} {
		_, err := closeOptions(tc.param)
		if tc.wantErr == "" {
			require.NoError(t, err, tc.param)
			continue
		}
		require.ErrorContains(t, err, tc.wantErr, tc.param)
	}
	o, err := closeOptions("pageSize=200, maxOrders=1000,maxPerSecond=50.5,dryRun=true")
	require.NoError(t, err)
	require.Equal(t, 200, o.PageSize)
	require.Equal(t, 1000, o.MaxOrders)
	require.Equal(t, 50.5, o.MaxPerSecond)
	require.True(t, o.DryRun)
}

// A key given twice is refused in both forms and by every handler's param,
// naming the key: the JSON form used to keep the last value, so
// {"dryRun":true,"dryRun":false} ran for real.
func TestParamsRepeatedKey(t *testing.T) {
	t.Parallel()
	parsers := map[string]func(string) error{
		"close":       func(s string) error { _, err := closeOptions(s); return err },
		"deadletter":  func(s string) error { _, err := retryOptions(s); return err },
		"delaySweep":  func(s string) error { _, err := delaySweepOptions(s); return err },
		"autoConfirm": func(s string) error { _, err := lifecycleOptions(s, "days"); return err },
	}
	for _, tc := range []struct {
		parser, param, wantErr string
	}{
		{"close", `{"dryRun":true,"dryRun":false}`, `job param key "dryRun" given twice`},
		{"close", `{"dryRun":true, "pageSize":10, "dryRun":true}`, `job param key "dryRun" given twice`},
		{"close", "dryRun=true,dryRun=false", `job param key "dryRun" given twice`},
		{"close", `{"dryRun":true,"dryRun":[false]}`, `job param key "dryRun" given twice`},
		{"close", `{"dryRun":true,"dryRun":}`, "does not parse"},
		{"close", `{"dryRun":true}{"dryRun":false}`, "text after the JSON object"},
		{"close", `{"dryRun":null}`, `job param key "dryRun": value must be a string, number or boolean`},
		{"close", `{"dryRun":true,"DryRun":false}`, "unknown job param key(s) DryRun"},
		{"close", `{"dryRun":true,"pageSize":7}`, ""},
		{"deadletter", `{"dryRun":true,"dryRun":false}`, `job param key "dryRun" given twice`},
		{"deadletter", `{"maxLetters":1,"maxLetters":1000}`, `job param key "maxLetters" given twice`},
		{"delaySweep", `{"limit":1,"limit":100000}`, `job param key "limit" given twice`},
		{"delaySweep", `{"limit":5}`, ""},
		{"autoConfirm", `{"days":30,"dryRun":true,"days":1,"dryRun":false}`, `job param key "days" given twice`},
		{"autoConfirm", `{"days":30,"dryRun":true}`, ""},
	} {
		err := parsers[tc.parser](tc.param)
		if tc.wantErr == "" {
			require.NoError(t, err, "%s %s", tc.parser, tc.param)
			continue
		}
		require.ErrorContains(t, err, tc.wantErr, "%s %s", tc.parser, tc.param)
	}
}

// Any input either parses or fails with a message; nothing panics, and an
// accepted param yields values in their documented ranges.
func FuzzCloseOptions(f *testing.F) {
	for _, s := range []string{"", "pageSize=10", `{"dryRun":true}`, "maxPerSecond=1e3,maxOrders=5", "a=b=c", ",,,", "{", `{"pageSize":1e99}`} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, s string) {
		o, err := closeOptions(s)
		if err != nil {
			require.True(t, utf8.ValidString(err.Error()) || !utf8.ValidString(s))
			return
		}
		require.True(t, o.PageSize >= 0 && o.PageSize <= 5000)
		require.True(t, o.MaxOrders >= 0)
		require.True(t, o.MaxPerSecond >= 0 && o.MaxPerSecond <= 1e6)
	})
}

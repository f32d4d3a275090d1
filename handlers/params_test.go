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

package compat

import (
	"encoding/json"
	"testing"

	"github.com/poolsim/poolsim/models/poolmode"
)

func TestWorks(t *testing.T) {
	tests := []struct {
		mode        poolmode.Mode
		maxPrepared int
		f           Feature
		want        bool
	}{
		{poolmode.Direct, 0, AdvisoryLocks, true},
		{poolmode.Session, 0, SetReset, true},
		{poolmode.Session, 0, ProtocolPrepared, true},
		{poolmode.Transaction, 0, Transactions, true},
		{poolmode.Transaction, 0, SetReset, false},
		{poolmode.Transaction, 0, ProtocolPrepared, false},
		{poolmode.Transaction, 200, ProtocolPrepared, true},
		{poolmode.Transaction, 200, SQLPrepare, false},
		{poolmode.Statement, 0, Transactions, false},
		{poolmode.Statement, 200, ProtocolPrepared, true},
		{poolmode.Statement, 200, TempTables, false},
	}
	for _, tt := range tests {
		if got := Works(tt.mode, tt.maxPrepared, tt.f); got != tt.want {
			t.Errorf("Works(%v, %d, %v) = %v, want %v", tt.mode, tt.maxPrepared, tt.f, got, tt.want)
		}
	}
}

func TestMatrixJSONOrder(t *testing.T) {
	b, err := json.Marshal(For(poolmode.Transaction, 0))
	if err != nil {
		t.Fatal(err)
	}
	want := `{"transactions":"ok","set_reset":"broken","listen":"broken","sql_prepare":"broken","protocol_prepared":"broken","advisory_locks":"broken","with_hold_cursors":"broken","temp_tables":"broken"}`
	if string(b) != want {
		t.Errorf("json = %s\nwant   %s", b, want)
	}
	for _, f := range Features {
		if g, err := ParseFeature(f.String()); err != nil || g != f {
			t.Errorf("ParseFeature(%q) = %v, %v", f, g, err)
		}
	}
}

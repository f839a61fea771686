package poolmode

import "testing"

func TestAfterReady(t *testing.T) {
	tests := []struct {
		mode        Mode
		status      TxStatus
		outstanding int
		want        Decision
	}{
		{Direct, Idle, 0, Keep},
		{Direct, InBlock, 0, Keep},
		{Session, Idle, 0, Keep},
		{Session, InBlock, 0, Keep},
		{Session, Failed, 0, Keep},
		{Transaction, Idle, 0, Release},
		{Transaction, Idle, 1, Keep}, // pipelined Sync still unanswered
		{Transaction, InBlock, 0, Keep},
		{Transaction, Failed, 0, Keep}, // failed block still needs ROLLBACK
		{Statement, Idle, 0, Release},
		{Statement, Idle, 2, Keep},
		{Statement, InBlock, 0, Refuse},
		{Statement, Failed, 0, Refuse},
	}
	for _, tt := range tests {
		if got := tt.mode.AfterReady(tt.status, tt.outstanding); got != tt.want {
			t.Errorf("%v.AfterReady(%c, %d) = %v, want %v", tt.mode, tt.status, tt.outstanding, got, tt.want)
		}
	}
}

func TestClientGone(t *testing.T) {
	tests := []struct {
		mode  Mode
		clean bool
		want  Decision
	}{
		{Session, true, Reset},
		{Session, false, Close},
		{Transaction, true, Release},
		{Transaction, false, Close},
		{Statement, true, Release},
		{Statement, false, Close},
	}
	for _, tt := range tests {
		if got := tt.mode.ClientGone(tt.clean); got != tt.want {
			t.Errorf("%v.ClientGone(%v) = %v, want %v", tt.mode, tt.clean, got, tt.want)
		}
	}
}

func TestNeedsServer(t *testing.T) {
	tests := []struct {
		mode Mode
		msg  byte
		want bool
	}{
		{Direct, 'Q', false},
		{Session, 'Q', true},
		{Transaction, 'Q', true},
		{Transaction, 'P', true},
		{Transaction, 'B', true},
		{Transaction, 'S', true},
		{Transaction, 'H', false},
		{Statement, 'X', false},
	}
	for _, tt := range tests {
		if got := tt.mode.NeedsServer(tt.msg); got != tt.want {
			t.Errorf("%v.NeedsServer(%c) = %v, want %v", tt.mode, tt.msg, got, tt.want)
		}
	}
}

func TestParse(t *testing.T) {
	for _, m := range Modes {
		got, err := Parse(m.String())
		if err != nil || got != m {
			t.Errorf("Parse(%q) = %v, %v; want %v", m.String(), got, err, m)
		}
	}
	if _, err := Parse("pooled"); err == nil {
		t.Error("Parse(\"pooled\") succeeded, want an error")
	}
}

package vary

import (
	"github.com/poolsim/poolsim/scenarios"
	"strings"
	"testing"
)

func TestValues(t *testing.T) {
	tests := []struct {
		in   string
		want string
		log  bool
	}{
		{"1,2,5,10", "1 2 5 10", false},
		{"session, transaction", "session transaction", false},
		{"{dist: exp, mean: 1ms},2ms", "{dist: exp, mean: 1ms} 2ms", false},
		{"1..5", "1 2 3 4 5", false},
		{"10..50/10", "10 20 30 40 50", false},
		{"0.1..0.5/0.1", "0.1 0.2 0.3 0.4 0.5", false},
		{"1ms..3ms/1ms", "1ms 2ms 3ms", false},
		{"10/s..30/s/10", "10/s 20/s 30/s", false},
		{"1..150/log", "1 2 3 4 5 6 8 10 12 15 19 24 30 38 48 60 76 95 119 150", true},
		{"10..400/log", "10 12 15 19 24 30 37 46 57 70 88 109 135 168 209 259 322 400", true},
		{"10ms..100ms/log", "10ms 12.6ms 15.8ms 20ms 25.1ms 31.6ms 39.8ms 50.1ms 63.1ms 79.4ms 100ms", true},
		{"10/s..100/s/log", "10/s 12.6/s 15.8/s 20/s 25.1/s 31.6/s 39.8/s 50.1/s 63.1/s 79.4/s 100/s", true},
		{"1..1000/log4", "1 10 100 1000", true},
		{"7..7/log", "7", true},
	}
	for _, tt := range tests {
		nodes, log, err := Values(tt.in)
		if err != nil {
			t.Errorf("%q: %v", tt.in, err)
			continue
		}
		var got []string
		for _, n := range nodes {
			got = append(got, scenarios.ValueText(n))
		}
		if strings.Join(got, " ") != tt.want || log != tt.log {
			t.Errorf("%q = %q (log %v), want %q (log %v)", tt.in, strings.Join(got, " "), log, tt.want, tt.log)
		}
	}
}

func TestErrors(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", "want key=values"},
		{"workload.clients", "want key=values"},
		{"workload.clients=", "no values"},
		{"workload.clients=10..1", "end is below the start"},
		{"workload.clients=0..100/log", "must start above 0"},
		{"workload.clients=1..100/logx", "/logN wants a count"},
		{"workload.clients=1..1000000000", "more than"},
		{"workload.clients=1..10/0", "step must be above 0"},
		{"workload.query=1ms..10ms", "needs a step or /log"},
		{"workload.query=1ms..10", "same kind"},
		{"workload.clients=a..b", "is not a number"},
		{"workload.clients=1,,2", "not a list"},
		{"workload.clients=[1,2", "not a list"},
	}
	for _, tt := range tests {
		_, err := Parse(tt.in)
		if err == nil || !strings.Contains(err.Error(), tt.want) {
			t.Errorf("Parse(%q) = %v, want an error containing %q", tt.in, err, tt.want)
		}
		if err != nil && strings.Contains(err.Error(), "\n") {
			t.Errorf("Parse(%q): error is more than one line: %q", tt.in, err)
		}
	}
}

func TestParseKey(t *testing.T) {
	a, err := Parse(" pooler.mode = session,transaction")
	if err != nil || a.Key != "pooler.mode" || strings.Join(a.Texts(), ",") != "session,transaction" {
		t.Fatalf("Parse = %+v, %v", a, err)
	}
}

func TestInts(t *testing.T) {
	v, log, err := Ints("1..20/log")
	if err != nil || !log || len(v) != 11 || v[0] != 1 || v[10] != 20 {
		t.Fatalf("Ints = %v %v %v", v, log, err)
	}
	if _, _, err := Ints("1,two"); err == nil {
		t.Fatal("Ints accepted a word")
	}
}

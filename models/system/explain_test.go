package system

import (
	"strings"
	"testing"
	"time"

	"github.com/poolsim/poolsim/models/poolmode"
	"github.com/poolsim/poolsim/sim"
)

func TestExplain(t *testing.T) {
	open := openPool(80, 10, sim.ExpDist(100*sim.Millisecond), 500*sim.Second)
	text := explainText(Explain(open, Run(open).Metrics, nil))
	for _, want := range []string{"Little's law says L = λW", "exactly M/M/c", "Erlang C gives P(wait) = 0.4092 and Wq = 20.459008ms"} {
		if !strings.Contains(text, want) {
			t.Errorf("open M/M/c explanation lacks %q:\n%s", want, text)
		}
	}
	open.Pooler.QueryWaitTimeout = 100 * time.Millisecond
	if text := explainText(Explain(open, Run(open).Metrics, nil)); !strings.Contains(text, "M/M/c+D gives P(timeout)") {
		t.Errorf("timeout explanation lacks M/M/c+D:\n%s", text)
	}
	c := closed(poolmode.Transaction, 200, 3, 6, 300*sim.Microsecond, 800*sim.Microsecond)
	c.Pooler.Hop = 25 * sim.Microsecond
	c.Server.MaxConnections = 20
	c.Server.SuperuserReserved = 0 // every slot serves the clients
	text = explainText(Explain(c, Run(c).Metrics, nil))
	for _, want := range []string{"Bounds for a closed system", "N* = (R0+Z)/D_max = 22.81 clients", "1/D_max) = 3305.79/s"} {
		if !strings.Contains(text, want) {
			t.Errorf("closed explanation lacks %q:\n%s", want, text)
		}
	}
}

// explainText is the paragraphs' texts, one a line.
func explainText(ps []Paragraph) string {
	var b strings.Builder
	for _, p := range ps {
		b.WriteString(p.Text + "\n")
	}
	return b.String()
}

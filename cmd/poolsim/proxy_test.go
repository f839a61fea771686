package main

import (
	"bytes"
	"context"
	"io"
	"net/http"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"
)

func TestProxyHelp(t *testing.T) {
	var out, errb bytes.Buffer
	code := run(context.Background(), []string{"proxy", "--help"}, &out, &errb)
	if code != exitOK {
		t.Fatalf("proxy --help: exit %d, want 0", code)
	}
	help := out.String() + errb.String()
	for _, flag := range []string{"--listen", "--upstream", "--mode", "--pool-size", "--max-client-conn",
		"--max-db-connections", "--query-wait-timeout", "--server-connect-timeout", "--server-idle-timeout",
		"--server-lifetime", "--server-reset-query", "--auth-type", "--auth-file", "--shutdown-timeout",
		"--max-prepared-statements", "Prepared statements:", "Examples:", "Exit status",
		"--client-login-timeout", "--autodb-idle-timeout", "--admin-users", "--stats-users", "--pkt-buf",
		"--max-packet-size", "PGCONNECT_TIMEOUT", "PGPASSWORD"} {
		if !strings.Contains(help, flag) {
			t.Errorf("proxy --help does not mention %s", flag)
		}
	}
}

func TestProxyBadSettings(t *testing.T) {
	up := "--upstream=postgres://u:p@127.0.0.1:5432/db"
	for _, args := range [][]string{
		{"--pool-size", "0", up},
		{"--mode", "direct", up},
		{"--mode", "bogus", up},
		{"--listen", "0.0.0.0:6432", up},
		{"--auth-type", "md5", up},
		{"--query-wait-timeout", "-1s", up},
		{"--max-client-conn", "x", up},
		{},
		{up, "extra"},
		{"--threads", "-1", up},
		{"--max-prepared-statements", "-1", up},
		{"--client-login-timeout", "-1s", up},
		{"--autodb-idle-timeout", "-1s", up},
		{"--pkt-buf", "10", up},
		{"--max-packet-size", "100", up},
		{"--admin-users", "a b", up},
	} {
		var out, errb bytes.Buffer
		code := run(context.Background(), append([]string{"proxy"}, args...), &out, &errb)
		if code != exitUsage {
			t.Errorf("proxy %v: exit %d, want 2 (stderr %q)", args, code, errb.String())
		}
		msg := strings.TrimSpace(errb.String())
		if msg == "" || strings.Count(msg, "\n") > 0 && !strings.Contains(msg, "Usage") {
			t.Errorf("proxy %v: stderr %q, want one clear line", args, msg)
		}
	}
}

// TestProxyRunsAndStops: the proxy listens, serves its metrics
// (--metrics-listen), and stops with status 0 when its context is
// cancelled (SIGINT/SIGTERM in main).
func TestProxyRunsAndStops(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb syncBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"proxy", "--listen", "127.0.0.1:0", "--upstream", "postgres://u:p@127.0.0.1:1/db",
			"--shutdown-timeout", "1s", "--metrics-listen", "127.0.0.1:0"}, &out, &errb)
	}()
	deadline := time.Now().Add(5 * time.Second)
	metricsURL := regexp.MustCompile(`metrics on (http://\S+)`)
	for !strings.Contains(out.String(), "listening on 127.0.0.1:") || metricsURL.FindStringSubmatch(out.String()) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("proxy did not report listening and its metrics: stdout %q stderr %q", out.String(), errb.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if strings.Contains(out.String(), ":p@") {
		t.Errorf("stdout shows the upstream password: %q", out.String())
	}
	resp, err := http.Get(metricsURL.FindStringSubmatch(out.String())[1])
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK || !strings.Contains(string(body), "poolsim_proxy_list_items{list=\"databases\"}") {
		t.Errorf("metrics: %s\n%.500s", resp.Status, body)
	}
	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Errorf("exit %d after cancel, want 0 (stderr %q)", code, errb.String())
		}
	case <-time.After(5 * time.Second):
		t.Fatal("proxy did not stop after cancel")
	}
}

type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
